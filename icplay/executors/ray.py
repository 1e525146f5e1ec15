"""Distributed runs on a Ray cluster: ``icplay run ... --ray [ADDRESS]``.

Live objects (a model client, sandbox pools, a budget) cannot cross machines, so a node
gets the run's ``RunSpec`` (``icplay.executors.specs``) and builds its own. The unit of
work is one episode, ``run_episode(task, spec) -> Trajectory``, run by ``EpisodeWorker`` actors
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

import logging
import time
from dataclasses import replace
from typing import Any

from icplay.episode import Trajectory
from icplay.executors.episode import FatalEpisodeError, run_episode
from icplay.executors.local import RunResult, Runner
from icplay.executors.specs import RunSpec
from icplay.store import TrajectoryBusyError
from icplay.tasks.model import Task

_log = logging.getLogger(__name__)


class EpisodeWorker:
    """One Ray actor: builds its env and policy once from the run's spec, then plays
    episodes on request (``run_episode``, the unit every executor runs)."""

    def __init__(self, spec: RunSpec):
        import ray

        self.node = ray.get_runtime_context().get_node_id()
        self.spec = replace(spec, policy_info={**spec.policy_info, "node": self.node})
        self.factory = spec.env_factory()
        self.env = None
        self.policy = spec.build_policy()

    def run_episode(self, task_data: dict[str, Any]) -> dict[str, Any]:
        task = Task.from_dict(task_data)
        try:
            if self.env is None:
                self.env = self.factory()
            traj = run_episode(task, self.spec, env=self.env, policy=self.policy)
        except FatalEpisodeError as exc:
            traj = exc.trajectory or Trajectory(task=task.to_dict(), env=task.env, sandbox="",
                                                policy=dict(self.spec.policy_info))
            traj.status, traj.error = "error", str(exc)
        except Exception as exc:     # an env that could not be built on this node (a plug-in's error too):
                                     # recorded as the episode's error, the run goes on
            traj = Trajectory(task=task.to_dict(), env=task.env, sandbox="", policy=dict(self.spec.policy_info),
                              status="error", error=f"{type(exc).__name__}: {exc}")
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
    except Exception as exc:   # Ray's own errors are of many classes (ConnectionError, RuntimeError, ...): one sentence
        raise RuntimeError(f"cannot join the Ray cluster at {address or 'a new local Ray'}: "
                           f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}") from None


class RayRunner(Runner):
    """``Runner`` whose episodes run on a Ray cluster (``address``: "auto", "ray://...", or
    None for a local one-node Ray)."""

    def __init__(self, tasks: list[Task], spec: RunSpec, store, *, address: str | None, **options):
        # the local env factory and policy are never built: the nodes build their own
        super().__init__(tasks, None, None, dict(spec.policy_info), store, protocol=spec.protocol,
                         limits=spec.limits, spec=spec, **options)
        self.address = address
        self.nodes: dict[str, int] = {}

    def run(self) -> RunResult:
        try:
            import ray   # an optional dependency (icplay[ray])
        except ImportError:
            raise RuntimeError("--ray needs Ray: pip install 'icplay[ray]'") from None
        connect(ray, self.address)
        started = time.monotonic()
        results, resumed, todo = self.split_finished()
        self._start_progress(resumed)
        errors: list[str] = []
        actor_class = ray.remote(num_cpus=1, max_restarts=0)(EpisodeWorker)
        actors = [actor_class.options(scheduling_strategy="SPREAD").remote(self.spec)
                  for _ in range(min(self.jobs, max(1, len(todo))))]
        in_flight: dict[Any, tuple[int, Task, Any]] = {}
        idle = list(actors)
        queue = list(todo)
        try:
            while (queue or in_flight) and not self._stop.is_set():
                self._dispatch(queue, idle, in_flight)
                if not in_flight:
                    break
                ready, _ = ray.wait(list(in_flight), num_returns=1, timeout=0.5)
                for ref in ready:
                    index, task, actor = in_flight.pop(ref)
                    idle.append(actor)
                    traj = self._finished(Trajectory.from_dict(ray.get(ref)), errors)
                    if traj.status in ("submitted", "error"):
                        results[index] = traj
        except KeyboardInterrupt:
            self.stop("interrupted")
        finally:
            self._shut_down(ray, in_flight, actors)
        return self._result(results, resumed, errors, started)

    def _dispatch(self, queue: list[tuple[int, Task]], idle: list[Any],
                  in_flight: dict[Any, tuple[int, Task, Any]]) -> None:
        """Hand queued tasks to idle actors (a task another run holds is skipped, said so)."""
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

    def _finished(self, traj: Trajectory, errors: list[str]) -> Trajectory:
        """An actor's episode: saved, counted by node, shown, its error kept."""
        self.store.save(traj)
        node = traj.policy.get("node", "?")
        self.nodes[node] = self.nodes.get(node, 0) + 1
        if self.progress:
            self.progress.add_usage(traj.tokens, traj.cost)
            self.progress.finished(traj)
        if traj.status == "error":
            errors.append(f"{traj.task_key}: {traj.error}")
        return traj

    def _shut_down(self, ray: Any, in_flight: dict[Any, tuple[int, Task, Any]], actors: list[Any]) -> None:
        """Cancel what still runs (its tasks released), close the actors' envs, end the actors."""
        if self.progress:
            self.progress.close()
        for ref, (_, task, _) in in_flight.items():
            ray.cancel(ref, force=True)
            self.store.release(task.set, task.id)
        try:
            ray.get([a.close.remote() for a in actors], timeout=60)
        except ray.exceptions.RayError as exc:   # an actor that died or whose close failed: killed below anyway
            _log.warning("closing the Ray actors' envs failed: %s: %s", type(exc).__name__, exc)
        for actor in actors:
            ray.kill(actor)


__all__ = ["EpisodeWorker", "RayRunner", "connect"]
