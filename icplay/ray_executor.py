"""Distributed runs on a Ray cluster: ``icplay run ... --ray [ADDRESS]``.

Live objects (a model client, sandbox pools, a budget) cannot cross machines, so a node
gets plain specs and builds its own: ``EnvSpec`` (language, sandbox, image) and
``PolicySpec`` (gold, replay, or an LLM's settings). The unit of work is one episode,
``run_episode(task, specs, limits) -> Trajectory``, run by ``EpisodeWorker`` actors
spread over the nodes (``-j`` actors; each keeps its env, so Docker containers and
SQLite copies stay warm on its node, and builds the images it lacks on first use, with
its own Docker daemon or bwrap). Finished trajectories come back as they complete and are
saved to the local ``--out`` folder; progress, resume and the tables are the local
runner's (``RayRunner`` is a ``Runner``). Each trajectory notes the node that ran it in
``policy["node"]``.

Limits: an episode under way on a node is not saved turn by turn locally (a run killed
mid-way replays it); the run budget (``--run-tokens``/``--run-cost``) is checked as
episodes come back, not during them; icplay must be installed on every node (same version).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

from icplay.agents.protocols import Limits, play
from icplay.languages import EnvFactory
from icplay.episode import Trajectory
from icplay.runner import RunResult, Runner
from icplay.store import TrajectoryBusyError
from icplay.tasks.model import Task


@dataclass(frozen=True)
class EnvSpec:
    env_name: str
    sandbox: str | None = None
    image: str | None = None
    recycle: bool = True

    def factory(self) -> EnvFactory:
        return EnvFactory(self.env_name, self.sandbox, image=self.image, recycle=self.recycle)


@dataclass(frozen=True)
class PolicySpec:
    """What a node needs to build the policy: ``kind`` gold, replay or llm, and its settings.
    An LLM's API key travels only when given on the command line (else the node's
    $OPENAI_API_KEY is used)."""

    kind: str
    replay: str | None = None
    model: str | None = None
    base_url: str | None = None
    api_key: str | None = None
    temperature: float = 0.0
    max_tokens: int = 1024
    timeout: float = 60.0
    retries: int = 6
    strategy: str = "tryagain"
    protocol: str = "intercode"
    context: int = 12000
    prices: dict[str, Any] = field(default_factory=dict)

    def build(self):
        from icplay.agents.replay import GoldPolicy, ReplayPolicy

        if self.kind == "gold":
            return GoldPolicy()
        if self.kind == "replay":
            return ReplayPolicy.from_path(self.replay)
        from icplay.agents.context import ContextLimits
        from icplay.agents.llm import ChatModel, LLMPolicy
        from icplay.agents.pricing import PriceTable

        model = ChatModel(self.model, base_url=self.base_url, api_key=self.api_key, temperature=self.temperature,
                          max_tokens=self.max_tokens, timeout=self.timeout, retries=self.retries,
                          prices=PriceTable(dict(self.prices)))
        return LLMPolicy(model, self.strategy, self.protocol, ContextLimits(max_tokens=self.context))


class EpisodeWorker:
    """One Ray actor: builds its env and policy once, then plays episodes on request."""

    def __init__(self, env_spec: EnvSpec, policy_spec: PolicySpec, protocol: str, limits: Limits,
                 policy_info: dict[str, Any]):
        import ray

        self.node = ray.get_runtime_context().get_node_id()
        self.factory = env_spec.factory()
        self.env = None
        self.policy = policy_spec.build()
        self.protocol, self.limits, self.policy_info = protocol, limits, policy_info

    def run_episode(self, task_data: dict[str, Any]) -> dict[str, Any]:
        task = Task.from_dict(task_data)
        holder: dict[str, Trajectory] = {}
        info = {**self.policy_info, "node": self.node}
        try:
            if self.env is None:
                self.env = self.factory()
            traj = play(self.env, task, self.policy, self.protocol, self.limits,
                        save=lambda t: holder.__setitem__("traj", t), policy_info=info)
        except Exception as exc:
            traj = holder.get("traj") or Trajectory(task=task.to_dict(), env=task.env, sandbox="",
                                                    policy=info)
            traj.status, traj.error = "error", f"{type(exc).__name__}: {exc}"
        return traj.to_dict()

    def close(self) -> None:
        if self.env is not None:
            self.env.close()
        self.factory.close()


def connect(ray, address: str | None) -> None:
    """Join the cluster at ``address`` (None: start a local Ray), or say in one line why not."""
    import socket

    if address and address not in ("auto",) and not address.startswith("ray://"):
        host, _, port = address.rpartition(":")
        try:
            socket.create_connection((host or "127.0.0.1", int(port)), timeout=5).close()
        except (OSError, ValueError) as exc:
            raise RuntimeError(f"no Ray cluster answers at {address} ({exc}); start one (ray start --head) "
                               "or give its address to --ray") from None
    options = {"include_dashboard": False} if address is None else {}
    try:
        ray.init(address=address, ignore_reinit_error=True, log_to_driver=False, logging_level="ERROR", **options)
    except Exception as exc:
        raise RuntimeError(f"cannot join the Ray cluster at {address or 'a new local Ray'}: "
                           f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}") from None


class RayRunner(Runner):
    """``Runner`` whose episodes run on a Ray cluster (``address``: "auto", "ray://...", or
    None for a local one-node Ray)."""

    def __init__(self, *args, address: str | None, env_spec: EnvSpec, policy_spec: PolicySpec, **kwargs):
        super().__init__(*args, **kwargs)
        self.address, self.env_spec, self.policy_spec = address, env_spec, policy_spec
        self.nodes: dict[str, int] = {}

    def run(self) -> RunResult:
        try:
            import ray
        except ImportError:
            raise RuntimeError("--ray needs Ray: pip install 'icplay[ray]'") from None
        connect(ray, self.address)
        started = time.monotonic()
        results, resumed, todo = self.split_finished()
        if self.progress:
            self.progress.resumed = self.progress.done = len(resumed)
            self.progress.counted_resumed(resumed)
            self.progress.start()
        errors: list[str] = []
        actor_class = ray.remote(num_cpus=1, max_restarts=0)(EpisodeWorker)
        actors = [actor_class.options(scheduling_strategy="SPREAD").remote(
                      self.env_spec, self.policy_spec, self.protocol, self.limits, dict(self.policy_info))
                  for _ in range(min(self.jobs, max(1, len(todo))))]
        in_flight: dict[Any, tuple[int, Task, Any]] = {}
        idle = list(actors)
        queue = list(todo)
        try:
            while (queue or in_flight) and not self._stop.is_set():
                while idle and queue and not self._should_stop():
                    index, task = queue.pop(0)
                    try:
                        self.store.claim(task.set, task.id)
                    except TrajectoryBusyError as exc:
                        if self.progress:
                            self.progress.stream.write(f"skipped {task.set}/{task.id}: {exc}\n")
                        continue
                    actor = idle.pop()
                    if self.progress:
                        self.progress.started_episode()
                    in_flight[actor.run_episode.remote(task.to_dict())] = (index, task, actor)
                if not in_flight:
                    break
                ready, _ = ray.wait(list(in_flight), num_returns=1, timeout=0.5)
                for ref in ready:
                    index, task, actor = in_flight.pop(ref)
                    idle.append(actor)
                    traj = Trajectory.from_dict(ray.get(ref))
                    self.store.save(traj)
                    node = traj.policy.get("node", "?")
                    self.nodes[node] = self.nodes.get(node, 0) + 1
                    if self.progress:
                        self.progress.add_usage(traj.tokens, traj.cost)
                        self.progress.finished(traj)
                    if traj.status == "error":
                        errors.append(f"{traj.task_key}: {traj.error}")
                    if traj.status in ("submitted", "error"):
                        results[index] = traj
        except KeyboardInterrupt:
            self.stop("interrupted")
        finally:
            if self.progress:
                self.progress.close()
            for ref, (_, task, _) in in_flight.items():
                ray.cancel(ref, force=True)
                self.store.release(task.set, task.id)
            try:
                ray.get([a.close.remote() for a in actors], timeout=60)
            except Exception:
                pass
            for actor in actors:
                ray.kill(actor)
        trajs = [results[i] for i in sorted(results)]
        old = {id(t) for t in resumed}
        return RunResult(trajs, resumed=len(resumed), played=sum(1 for t in trajs if id(t) not in old),
                         stopped=self._stop_reason, errors=errors, elapsed=time.monotonic() - started)


def policy_spec_from_args(args, kind: str) -> PolicySpec:
    """The PolicySpec of ``icplay run``'s options."""
    from icplay.agents.pricing import parse_price_option
    from icplay.agents.strategies import strategy_name

    if kind in ("gold", "replay"):
        return PolicySpec(kind, replay=args.replay)
    return PolicySpec("llm", model=args.model, base_url=args.base_url, api_key=args.api_key,
                      temperature=args.temperature, max_tokens=args.max_tokens, timeout=args.timeout,
                      retries=args.retries, strategy=strategy_name(args.strategy), protocol=args.protocol,
                      context=args.context, prices=dict(parse_price_option(p) for p in args.price))


__all__ = ["EnvSpec", "PolicySpec", "EpisodeWorker", "RayRunner", "policy_spec_from_args", "asdict"]
