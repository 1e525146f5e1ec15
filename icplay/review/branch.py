"""Branch a saved episode at a turn: play several continuations from the state before it,
each in a fresh sandbox, each to its end and scored.

A human's correction is evidence of a preference only when its outcome says so; branching
gets the outcome. For turn ``k`` (0-based; ``icplay branch --turn K`` counts from 1) the
continuations are:

- ``recorded`` (``correction`` when turn k is a human's edit or rejection): the recorded
  actions from turn k on, then the recorded submit (with its argument);
- ``proposal``: the agent's edited or rejected proposal instead of the human's correction,
  then the rest of the recorded actions and the submit (a rejected ``submit`` submits);
- ``sample``: a model plays on from the prefix (``samples`` of them, ``sample_policy``).

Each branch is ``fork(source, k)`` (the first k turns, ``forked_from`` naming the parent and
the turn, plus ``branch``: which continuation), opened on a fresh env with the prefix's
actions run again (``replay_turns``), then played by the ``Driver``: a ``ScriptPolicy``
proposes the scripted actions (each turn's info names the recorded turn and author it
replays), a model proposes its own. The driver scores it as the source's protocol does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from icplay.driver import Driver, DriverSettings, Limits
from icplay.envs.base import Env
from icplay.episode import AGENT_EDITED, HUMAN, Episode, Proposal, Trajectory, Turn
from icplay.review.fork import ForkError, fork
from icplay.session import replay_turns
from icplay.store import save_trajectory
from icplay.tasks.model import Task, TaskFileError
from icplay.tasks.registry import load_tasks

RECORDED, CORRECTION, PROPOSAL, SAMPLE = "recorded", "correction", "proposal", "sample"


class BranchError(ValueError):
    """A branch that cannot be played (one sentence)."""


@dataclass
class Continuation:
    """One way to go on from the prefix: scripted actions then ``submit`` (``script``), or a
    model (``script`` None)."""

    kind: str
    script: list[tuple[str, Turn | None]] | None = None   # (action, the recorded turn it replays)
    submit: str = "submit"
    note: str = ""


def recorded_submit(source: Trajectory) -> str:
    """The submit the episode ended with, with its argument (CTF's flag, Python's function)."""
    arg = source.submitted_arg
    return f"submit {arg}" if arg else "submit"


def _ran(turns: list[Turn]) -> list[tuple[str, Turn | None]]:
    return [(t.action, t) for t in turns if t.action and not t.info.get("invalid")]


def _correction_after(source: Trajectory, k: int) -> int | None:
    """After a rejection at turn k, the index of the next turn that ran, if a human ran it."""
    for later in source.turns[k + 1:]:
        if later.info.get("rejected") or not later.action or later.info.get("invalid"):
            continue
        return later.index if later.author in (HUMAN, AGENT_EDITED) else None
    return None


def continuations(source: Trajectory, k: int, samples: int = 0) -> list[Continuation]:
    """The continuations from turn ``k`` (see the module docstring)."""
    if not 0 <= k < len(source.turns):
        raise BranchError(f"cannot branch at turn {k + 1}: the episode has {len(source.turns)} turns (1 to "
                          f"{len(source.turns)})")
    turn, submit = source.turns[k], recorded_submit(source)
    rest = _ran(source.turns[k:])
    out = []
    if turn.author == AGENT_EDITED and turn.proposed is not None:
        out.append(Continuation(CORRECTION, rest, submit, "the human's edit, then the recorded turns"))
        out.append(Continuation(PROPOSAL, [(turn.proposed, None), *rest[1:]], submit,
                                "the agent's proposal as it was, then the recorded turns"))
    elif turn.info.get("rejected") and turn.proposed and (fixed := _correction_after(source, k)) is not None:
        after = _ran(source.turns[fixed + 1:])
        out.append(Continuation(CORRECTION, rest, submit, "the human's action after the rejection, then the recorded turns"))
        if turn.proposed.strip().split()[0] == "submit":
            out.append(Continuation(PROPOSAL, [], turn.proposed.strip(), "the agent's rejected submit"))
        else:
            out.append(Continuation(PROPOSAL, [(turn.proposed, None), *after], submit,
                                    "the agent's rejected proposal, then the recorded turns"))
    else:
        out.append(Continuation(RECORDED, rest, submit, "the recorded turns"))
    out.extend(Continuation(SAMPLE, None, note="a model plays on") for _ in range(samples))
    return out


class ScriptPolicy:
    """Proposes a continuation's actions after the prefix, then its submit."""

    def __init__(self, continuation: Continuation, prefix_taken: int):
        self.continuation = continuation
        self.prefix_taken = prefix_taken

    def describe(self) -> dict[str, Any]:
        return {"kind": "branch", "branch": self.continuation.kind}

    def propose(self, task: Task, trajectory: Trajectory, cancel=None, notify=None) -> Proposal:
        script = self.continuation.script or []
        pos = trajectory.turns_taken - self.prefix_taken
        if pos >= len(script):
            submit = self.continuation.submit
            return Proposal(submit if submit != "submit" else None, info={"branch": self.continuation.kind})
        action, recorded = script[pos]
        info: dict[str, Any] = {"branch": self.continuation.kind}
        if recorded is not None:
            info["recorded"] = {"turn": recorded.index, "author": recorded.author}
        return Proposal(action, thought=recorded.thought if recorded is not None else None, info=info)


def local_task(source: Trajectory) -> Task:
    """The episode's task as this machine's task set has it (never rebuilt from the file: its
    image, setup and assets could be anyone's); BranchError when it is not here or differs."""
    set_name, task_id = str(source.task.get("set") or ""), str(source.task.get("id") or "")
    try:
        tasks = load_tasks(set_name, source.env) if set_name else []
    except TaskFileError as exc:
        raise BranchError(f"episode {source.id}: its task set {set_name!r} is not here ({exc})") from None
    task = next((t for t in tasks if t.id == task_id), None)
    if task is None:
        raise BranchError(f"episode {source.id}: task {set_name}/{task_id} is not in this machine's task sets")
    if " ".join(task.query.split()) != " ".join(str(source.task.get("query") or "").split()):
        raise BranchError(f"episode {source.id}: task {set_name}/{task_id} here asks another query than the recording")
    return task


@dataclass
class Branching:
    """What ``branch`` needs besides the source: a fresh env per branch, where to save, the
    model that plays the samples (a zero-argument factory of a policy), its limits."""

    make_env: Callable[[], Env]
    out: Path
    sample_policy: Callable[[], Any] | None = None
    limits: Limits = field(default_factory=lambda: Limits(max_turns=10))    # a sampled continuation's
    on_branch: Callable[[Trajectory], None] | None = None


def branch(source: Trajectory, k: int, samples: int, how: Branching) -> list[Trajectory]:
    """Every continuation of ``source`` from turn ``k`` played, scored and saved under
    ``how.out`` (one file per branch, ``<source id>.t<K>.<kind>.<branch id>.json``)."""
    task = local_task(source)
    plans = continuations(source, k, samples)
    if samples and how.sample_policy is None:
        raise BranchError("sampled continuations need a model (--model)")
    return [play(source, k, task, plan, how) for plan in plans]


def play(source: Trajectory, k: int, task: Task, plan: Continuation, how: Branching) -> Trajectory:
    """One continuation from the prefix, in a fresh env, to its end."""
    policy = ScriptPolicy(plan, 0) if plan.script is not None else how.sample_policy()   # type: ignore[misc]
    try:
        traj = fork(source, k, policy=policy.describe())
    except ForkError as exc:
        raise BranchError(str(exc)) from None
    traj.forked_from = {**(traj.forked_from or {}), "branch": plan.kind, "note": plan.note}
    traj.task = task.to_dict()
    path = how.out / f"{source.id}.t{k + 1}.{plan.kind}.{traj.id}.json"
    how.out.mkdir(parents=True, exist_ok=True)
    env = how.make_env()
    try:
        episode = Episode(env, task, save=lambda t: save_trajectory(t, path), trajectory=traj)
        replay_turns(env, task, traj.turns)
        if isinstance(policy, ScriptPolicy):
            policy.prefix_taken = traj.turns_taken
        protocol = str(source.policy.get("protocol") or "agent")
        limits = how.limits if plan.script is None else Limits(max_turns=None)
        Driver(episode, DriverSettings(policy, protocol, limits)).run()
    finally:
        env.close()
    if how.on_branch is not None:
        how.on_branch(traj)
    return traj
