"""An episode's record and its primitive steps: act, reject, score, submit, stop.

``Episode`` runs one action at a time and saves the trajectory after every turn, so a
killed process loses no completed turn. The loop around it — a policy proposes, a gate
decides, the env executes — is ``icplay.driver.Driver``, used by ``run``, ``play``,
``watch`` and the REPLs. Every turn keeps what was proposed, what ran and who decided.

One definition of "turns taken" (``Turn.counts`` / ``Trajectory.turns_taken``: executed
actions plus unparsable replies; rejected proposals do not count) and of token totals
(``usage_tokens`` / ``Trajectory.tokens``) serves the driver, the report and the TUI.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Protocol

from icplay.envs.base import Env, SubmitResult
from icplay.json_shape import NUMBER, check_fields, field_types
from icplay.languages.turns import TurnRule
from icplay.tasks.model import Task

TRAJECTORY_VERSION = 1
SUBMITTED_KEYS = ("function", "submitted")   # where a breakdown keeps submit's argument (Python, CTF)

HUMAN, AGENT, AGENT_EDITED = "human", "agent", "agent-edited-by-human"

# what a turn was, for sidebars and the report's author mix
KIND_AGENT, KIND_EDITED, KIND_HUMAN, KIND_REJECTED, KIND_INVALID = "agent", "edited", "human", "rejected", "invalid"
TURN_KINDS = (KIND_AGENT, KIND_EDITED, KIND_HUMAN, KIND_REJECTED, KIND_INVALID)

# How a strict verdict is shown wherever InterCode's solved is shown beside it: solved, not
# solved, and no verdict (an env that gives none, an episode recorded before verdicts existed),
# which is never shown as either.
STRICT_MARKS = {True: "✓", False: "✗", None: "–"}

# the keys of a policy block that say which policy it is (a resumed episode with other values changed hands)
POLICY_IDENTITY = ("kind", "model", "strategy", "source", "actions")


# The OS account a front end once put in the policy block (``user``): never recorded as who
# played, since on a shared machine it names the machine, not the person (the annotator does).
ACCOUNT_KEYS = ("user",)


def without_account(policy: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in policy.items() if k not in ACCOUNT_KEYS}


def annotator_label(annotator: str | None) -> str:
    """How an episode's annotator is shown: the name, or ``(no annotator)``."""
    return annotator or NO_ANNOTATOR


NO_ANNOTATOR = "(no annotator)"


def strict_mark(verdict: bool | None) -> str:
    return STRICT_MARKS[verdict]


def usage_tokens(usage: dict[str, Any] | None) -> int:
    """Prompt plus completion tokens of a usage dict (one call's or a sum)."""
    usage = usage or {}
    return (usage.get("prompt_tokens") or 0) + (usage.get("completion_tokens") or 0)


def add_usage(total: dict[str, Any], part: dict[str, Any]) -> dict[str, Any]:
    """Sum usage dicts (one call's, or sums); calls whose figure is unknown (None) are
    counted in ``prompt_tokens_unknown`` / ``completion_tokens_unknown`` / ``cost_unknown``."""
    out = dict(total)
    for key in ("prompt_tokens", "completion_tokens", "cost"):
        value, unknown = part.get(key), part.get(f"{key}_unknown")
        if value is None and unknown is None:
            unknown = part.get("calls") or 0
        if value is not None:
            out[key] = out.get(key, 0) + value
        if unknown:
            out[f"{key}_unknown"] = out.get(f"{key}_unknown", 0) + unknown
    for key in ("calls", "attempts", "reasoning_tokens", "cached_tokens", "estimated_calls"):
        if part.get(key) is not None:
            out[key] = out.get(key, 0) + part[key]
    if part.get("latency") is not None:
        out["latency"] = round(out.get("latency", 0) + part["latency"], 3)
    return out


# A human's judgement of one turn, for process supervision (``icplay export steps``): kept in
# the turn's ``info`` under LABEL_KEY with a note, who gave it and when.
GOOD, BAD, NEUTRAL = "good", "bad", "neutral"
STEP_LABELS = (GOOD, BAD, NEUTRAL)
LABEL_KEY = "label"
LABEL_NOTE_CHARS = 2000


def label_turn(turn: "Turn", label: str, note: str | None = None, author: str | None = None,
               when: float | None = None) -> dict[str, Any]:
    """Label ``turn`` good, bad or neutral (ValueError for another word); a later label replaces it."""
    if label not in STEP_LABELS:
        raise ValueError(f"a turn is labelled {', '.join(STEP_LABELS)}, not {label!r}")
    mark = {"label": label, "note": (note or "").strip()[:LABEL_NOTE_CHARS] or None, "author": author,
            "at": time.time() if when is None else when}
    turn.info[LABEL_KEY] = mark
    return mark


@dataclass
class Turn:
    """One executed action (or a rejected proposal) and what came of it."""

    index: int
    author: str                      # human | agent | agent-edited-by-human
    action: str                      # what was executed ("" for a rejected proposal)
    observation: str
    exit_code: int | None = None
    started_at: float = 0.0          # epoch seconds
    duration: float = 0.0            # seconds the action ran
    proposed: str | None = None      # the policy's proposal, when a policy proposed
    thought: str | None = None       # the model's reasoning shown with the proposal
    comment: str | None = None       # a human's comment on a rejected or edited proposal
    reward: float | None = None      # set when this turn was scored (intercode protocol)
    info: dict[str, Any] = field(default_factory=dict)
    reasoning: str | None = None     # what the model thought before its reply (never executed)

    def __post_init__(self) -> None:
        # a policy's reasoning travels in its proposal's info; on the turn it is a field of its own
        if self.reasoning is None and isinstance(self.info.get("reasoning"), str):
            self.info = dict(self.info)
            self.reasoning = self.info.pop("reasoning") or None

    @classmethod
    def from_dict(cls, d: dict[str, Any], where: str = "turn") -> "Turn":
        """A turn from its saved form; ``FieldError`` names the first field that is missing or
        of the wrong type (``where`` is the turn's path, ``turns[3]``)."""
        check_fields(d, TURN_FIELDS, TURN_REQUIRED, where)
        verdict = d.get("info", {}).get("strict")
        if verdict is not None:
            check_fields(verdict, STRICT_FIELDS, where=f"{where}.info.strict")
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in d.items() if k in known})

    @property
    def label(self) -> dict[str, Any] | None:
        """The human's label on this turn (``{"label", "note", "author", "at"}``), if it has a
        well-formed one (a saved file's odd value is no label)."""
        mark = self.info.get(LABEL_KEY)
        if not isinstance(mark, dict) or mark.get("label") not in STEP_LABELS:
            return None
        return mark

    @property
    def counts(self) -> bool:
        """Whether this turn used up one of the episode's turns (an action ran, or the reply was unparsable)."""
        return bool(self.action) or bool(self.info.get("invalid"))

    @property
    def kind(self) -> str:
        """agent | edited | human | rejected | invalid."""
        if self.info.get("rejected"):
            return KIND_REJECTED
        if self.info.get("invalid"):
            return KIND_INVALID
        if self.author == AGENT_EDITED:
            return KIND_EDITED
        return KIND_HUMAN if self.author == HUMAN else KIND_AGENT


@dataclass
class Trajectory:
    """Everything about one episode; the unit saved, resumed, replayed and reported."""

    task: dict[str, Any]
    env: str
    sandbox: str
    policy: dict[str, Any] = field(default_factory=lambda: {"kind": "human"})
    turns: list[Turn] = field(default_factory=list)
    status: str = "running"          # running | submitted | stopped | error
    reward: float | None = None      # the final (submit) reward
    best_reward: float | None = None  # best reward over the episode's scored turns
    breakdown: dict[str, Any] | None = None
    strict: dict[str, Any] | None = None   # the submit's strict verdict {"solved", "reasons"} (envs/base.strict_verdict)
    gold_output: str | None = None
    time_worked: float = 0.0         # seconds a human spent on the task (pauses excluded)
    started_at: float = field(default_factory=time.time)
    updated_at: float = field(default_factory=time.time)
    id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    error: str | None = None
    version: int = TRAJECTORY_VERSION
    forked_from: dict[str, Any] | None = None   # {"id", "turn"}: the episode whose first turns this one replayed
    # who played, and which try this is (docs/tui.md "Annotators and attempts"); None in older files
    annotator: str | None = None     # the human's name as given (--annotator); never the OS user
    attempt: int | None = None       # 1, 2, ...: this episode's place among the task's attempts in its store
    gold_seen_at: float | None = None   # when the gold solution was shown after this attempt's submit
    after_gold_seen: bool = False    # an earlier attempt of this task by this annotator had its gold shown
    study: str | None = None         # the study this episode was played in (icplay.study), if any

    @property
    def task_key(self) -> str:
        return f"{self.task.get('set', '')}/{self.task.get('id', '')}"

    @property
    def solved(self) -> bool:
        best = self.best_reward if self.best_reward is not None else self.reward
        return best is not None and best >= 1.0

    @property
    def submitted_arg(self) -> str | None:
        """What the submit was given, where the language's submit takes an argument (the
        breakdown keeps Python's function, CTF's flag); None otherwise."""
        breakdown = self.breakdown or {}
        return next((str(breakdown[k]) for k in SUBMITTED_KEYS if breakdown.get(k)), None)

    @property
    def strictly_solved(self) -> bool | None:
        """Solved under the strict verdict at submit or at any scored turn; None when no verdict was given."""
        verdicts = [t.info["strict"] for t in self.turns if isinstance(t.info.get("strict"), dict)]
        if isinstance(self.strict, dict):
            verdicts.append(self.strict)
        if not verdicts:
            return None
        return any(v.get("solved") is True for v in verdicts)    # only a real true (the reader checks the type)

    @property
    def strict_reasons(self) -> list[str]:
        """Why the episode is not strictly solved: the reasons of its last verdict (the submit's
        when there is one); empty when it is strictly solved or was never judged."""
        if self.strictly_solved is not False:
            return []
        verdict = self.strict if isinstance(self.strict, dict) else next(
            t.info["strict"] for t in reversed(self.turns) if isinstance(t.info.get("strict"), dict))
        return [str(r) for r in verdict.get("reasons") or []]

    @property
    def turns_taken(self) -> int:
        """The turns used up (see ``Turn.counts``): what limits, reports and screens count."""
        return sum(1 for t in self.turns if t.counts)

    @property
    def usage(self) -> dict[str, Any]:
        """The policy's summed usage (tokens, cost, calls); {} for human play."""
        return self.policy.get("usage") or {}

    @property
    def tokens(self) -> int:
        return usage_tokens(self.usage)

    @property
    def cost(self) -> float | None:
        """Dollars spent; None when calls were made that no price covers."""
        usage = self.usage
        if usage.get("cost") is None and usage.get("calls"):
            return None
        return usage.get("cost") or 0.0

    def author_mix(self) -> dict[str, int]:
        """Turns by kind (agent, edited, human, rejected, invalid)."""
        mix = {k: 0 for k in TURN_KINDS}
        for t in self.turns:
            mix[t.kind] += 1
        return mix

    @property
    def intervened(self) -> bool:
        """Whether a human stepped into an agent's episode (edited, rejected, or acted)."""
        if self.policy.get("kind", "human") == "human":
            return False
        return any(t.kind in (KIND_EDITED, KIND_HUMAN, KIND_REJECTED) for t in self.turns)

    def adopt_policy(self, info: dict[str, Any]) -> None:
        """A resumed episode goes on with this policy: its block says so, the earlier one is kept
        under ``previous`` (with the usage summed over both)."""
        old, info = self.policy or {}, without_account(info)
        if all(old.get(k) == info.get(k) for k in POLICY_IDENTITY):
            return
        earlier = list(old.get("previous") or [])
        earlier.append({k: v for k, v in old.items() if k not in ("previous", "usage")})
        self.policy = {**info, "usage": dict(old.get("usage") or {}), "previous": earlier}

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Trajectory":
        """A trajectory from its saved form, checked field by field (``TRAJECTORY_FIELDS``):
        ``FieldError`` names the first bad field by its path (``turns[3].reward``), so that
        a reader says which file and field instead of failing later in a table."""
        check_fields(d, TRAJECTORY_FIELDS, TRAJECTORY_REQUIRED)
        for name, fields in NESTED_FIELDS.items():
            if isinstance(d.get(name), dict):
                check_fields(d[name], fields, where=name)
        usage = (d.get("policy") or {}).get("usage")
        if usage is not None:
            check_fields(usage, USAGE_FIELDS, where="policy.usage")
        if isinstance(d.get("strict"), dict):
            check_fields(d["strict"], STRICT_FIELDS, where="strict")
        known = {f for f in cls.__dataclass_fields__}
        data = {k: v for k, v in d.items() if k in known}
        data["turns"] = [Turn.from_dict(t, f"turns[{i}]") for i, t in enumerate(d.get("turns", []))]
        return cls(**data)


# The saved fields' JSON types, checked by ``from_dict`` (readers rely on them: a table
# adds rewards and tokens, a sidebar reads the task's fields).
_TEXT, _OPT_TEXT, _OPT_NUMBER, _OPT_OBJECT = (str,), (str, type(None)), (*NUMBER, type(None)), (dict, type(None))
TRAJECTORY_REQUIRED = ("task", "env", "sandbox")
TRAJECTORY_FIELDS = field_types({
    "task": (dict,), "env": _TEXT, "sandbox": _TEXT, "policy": (dict,), "turns": (list,), "status": _TEXT,
    "reward": _OPT_NUMBER, "best_reward": _OPT_NUMBER, "breakdown": _OPT_OBJECT, "strict": _OPT_OBJECT,
    "gold_output": _OPT_TEXT, "time_worked": NUMBER, "started_at": NUMBER, "updated_at": NUMBER, "id": _TEXT,
    "error": _OPT_TEXT, "version": (int,), "forked_from": _OPT_OBJECT, "annotator": _OPT_TEXT,
    "attempt": (int, type(None)), "gold_seen_at": _OPT_NUMBER, "after_gold_seen": (bool,), "study": _OPT_TEXT,
})
NESTED_FIELDS = {
    "task": field_types({"id": (str, int), "set": _OPT_TEXT, "env": _OPT_TEXT, "query": _OPT_TEXT,
                         "hardness": _OPT_TEXT, "gold": _OPT_TEXT, "db": _OPT_TEXT, "image": _OPT_TEXT,
                         "network": (bool,), "extra": _OPT_OBJECT, "tags": (list, type(None)), "source": _OPT_TEXT}),
    "policy": field_types({"kind": _TEXT, "usage": _OPT_OBJECT, "max_turns": (int, type(None)), "model": _OPT_TEXT}),
}
USAGE_FIELDS = field_types({k: _OPT_NUMBER for k in ("prompt_tokens", "completion_tokens", "reasoning_tokens", "calls",
                                                      "cost", "cost_unknown", "completion_tokens_unknown")})
# a strict verdict counts only as a real true or false: "yes" or 1 is refused, never taken for solved
STRICT_FIELDS = field_types({"solved": (bool, type(None)), "reasons": (list, type(None))})
TURN_REQUIRED = ("index", "author", "action", "observation")
TURN_FIELDS = field_types({
    "index": (int,), "author": _TEXT, "action": _TEXT, "observation": _TEXT, "exit_code": (int, type(None)),
    "started_at": NUMBER, "duration": NUMBER, "proposed": _OPT_TEXT, "thought": _OPT_TEXT, "comment": _OPT_TEXT,
    "reward": _OPT_NUMBER, "info": (dict,), "reasoning": _OPT_TEXT,
})


@dataclass
class Proposal:
    """What a policy wants to do next; ``action`` None means submit."""

    action: str | None
    thought: str | None = None
    raw: str | None = None
    info: dict[str, Any] = field(default_factory=dict)   # tokens, cost, model, ...


class Cancelled(Exception):
    """A policy's ``propose`` gave up because its cancel event was set (no turn is recorded);
    ``usage`` is what the calls it cut short cost (the driver adds it to the episode's)."""

    def __init__(self, *args: Any, usage: dict[str, Any] | None = None):
        super().__init__(*args)
        self.usage = dict(usage or {})


class AgentError(RuntimeError):
    """A model call that failed; ``fatal`` means no other episode will do better (bad key, no server)."""

    def __init__(self, message: str, fatal: bool = True):
        super().__init__(message)
        self.fatal = fatal


class Policy(Protocol):
    def propose(self, task: Task, trajectory: Trajectory, cancel: threading.Event | None = None,
                notify: Callable[[str, dict[str, Any]], None] | None = None) -> Proposal:
        """The next proposal. When ``cancel`` is set the policy stops (also mid-request) and
        raises ``Cancelled``; the driver records nothing for it. ``notify(kind, data)``, when
        given, hears what the policy does meanwhile (a streamed reply, a retry)."""
        ...


# Decision kinds (``icplay.driver`` explains each)
RUN, EDIT, REJECT, TAKE_OVER, HAND_BACK = "run", "edit", "reject", "take_over", "hand_back"
SUBMIT, STOP = "submit", "stop"
DECISION_KINDS = (RUN, EDIT, REJECT, TAKE_OVER, HAND_BACK, SUBMIT, STOP)


@dataclass(frozen=True)
class Decision:
    """A verdict on a proposal, or a human's move.

    ``run``: run the proposal as is (or, answering a request for a human action, run
    ``action`` as the human's turn); ``edit``: run ``action`` instead of the proposal
    (recorded ``agent-edited-by-human``, the proposal kept); ``reject``: do not run it, tell
    the model ``comment``; ``take_over`` / ``hand_back``: the human acts / the agent acts
    again; ``submit``: end and score the episode (``action`` is submit's argument, if any);
    ``stop``: end the episode unscored (status ``stopped``, resumable).
    """

    kind: str
    action: str | None = None
    comment: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in DECISION_KINDS:
            raise ValueError(f"unknown decision {self.kind!r} (one of: {', '.join(DECISION_KINDS)})")

    @classmethod
    def run(cls, action: str | None = None) -> "Decision":
        return cls(RUN, action)

    @classmethod
    def edit(cls, action: str, comment: str | None = None) -> "Decision":
        return cls(EDIT, action, comment)

    @classmethod
    def reject(cls, comment: str | None = None) -> "Decision":
        return cls(REJECT, None, comment)

    @classmethod
    def submit(cls, arg: str | None = None) -> "Decision":
        return cls(SUBMIT, arg)

    @classmethod
    def stop(cls) -> "Decision":
        return cls(STOP)

    @classmethod
    def take_over(cls) -> "Decision":
        return cls(TAKE_OVER)

    @classmethod
    def hand_back(cls) -> "Decision":
        return cls(HAND_BACK)


class Gate(Protocol):
    def decide(self, proposal: Proposal, trajectory: Trajectory) -> Decision: ...


Saver = Callable[[Trajectory], None]


class Episode:
    """One task on one env: records each turn and saves after it."""

    def __init__(self, env: Env, task: Task, save: Saver | None = None, policy: dict[str, Any] | None = None,
                 trajectory: Trajectory | None = None, annotator: str | None = None, reset: bool = True):
        self.env = env
        self.task = task
        self._save = save
        self.before_save: Callable[[Trajectory], None] | None = None   # e.g. the driver notes the time worked
        self.trajectory = trajectory or Trajectory(task=task.to_dict(), env=env.name, sandbox=env.sandbox_kind,
                                                   policy=without_account(policy or {"kind": "human"}))
        self.annotator = annotator    # who signs the human turns from now on (else the trajectory's)
        if self.trajectory.annotator is None:
            self.trajectory.annotator = annotator
        # reset=False: the caller has just reset ``env`` to ``task`` (a resume replays the saved
        # turns through a scratch episode on the env the real one reset)
        self.query = env.reset(task) if reset else task.query

    def save(self) -> None:
        self.trajectory.updated_at = time.time()
        if self.before_save is not None:
            self.before_save(self.trajectory)
        if self._save is not None:
            self._save(self.trajectory)

    def _sign(self, turn: Turn) -> None:
        """A turn a human authored (acted, edited or rejected) names the episode's annotator."""
        annotator = self.annotator or self.trajectory.annotator
        if turn.author in (HUMAN, AGENT_EDITED) and annotator:
            turn.info["annotator"] = annotator

    def act(self, action: str, author: str = HUMAN, proposed: str | None = None, thought: str | None = None,
            comment: str | None = None, on_output: Callable[[str], None] | None = None,
            info: dict[str, Any] | None = None) -> Turn:
        """Execute one action, record it as a turn, save."""
        started = time.time()
        result = self.env.step(action, on_output=on_output)
        turn = Turn(index=len(self.trajectory.turns), author=author, action=action, observation=result.observation,
                    exit_code=result.exit_code, started_at=started, duration=result.duration, proposed=proposed,
                    thought=thought, comment=comment, info={**result.info, **(info or {})})
        self._sign(turn)
        self.trajectory.turns.append(turn)
        self.save()
        return turn

    def record_unrun(self, action: str, author: str = AGENT, info: dict[str, Any] | None = None) -> Turn:
        """Record a replayed action that its turn rule does not run (Python's ``submit NAME``
        under InterCode's loop: only scored); nothing reaches the env."""
        turn = Turn(index=len(self.trajectory.turns), author=author, action=action, observation="",
                    started_at=time.time(), info=dict(info or {}))
        self.trajectory.turns.append(turn)
        self.save()
        return turn

    def reject(self, proposal: Proposal, comment: str | None) -> Turn:
        """Record a proposal a human turned down; the comment goes back to the policy."""
        info = {"rejected": True, **proposal.info}
        if proposal.raw is not None:
            info.setdefault("raw", proposal.raw)
        turn = Turn(index=len(self.trajectory.turns), author=HUMAN, action="", observation="",
                    started_at=time.time(), proposed=proposal.action if proposal.action is not None else "submit",
                    thought=proposal.thought, comment=comment, info=info)
        self._sign(turn)
        self.trajectory.turns.append(turn)
        self.save()
        return turn

    def record_invalid(self, proposal: Proposal, reward: float | None = None) -> Turn:
        """Record a reply with no parsable action: it uses up a turn, nothing runs."""
        turn = Turn(index=len(self.trajectory.turns), author=AGENT, action="",
                    observation=proposal.info.get("retry_message") or "", started_at=time.time(),
                    thought=proposal.thought, info=dict(proposal.info), reward=reward)
        self.trajectory.turns.append(turn)
        if reward is not None:
            best = self.trajectory.best_reward
            self.trajectory.best_reward = reward if best is None else max(best, reward)
        self.save()
        return turn

    def score(self, arg: str | None = None) -> SubmitResult:
        """Score the current state without ending the episode (InterCode's per-turn reward)."""
        result = self.env.submit(arg)
        if self.trajectory.turns:
            self.trajectory.turns[-1].reward = result.reward
            if result.strict is not None:
                self.trajectory.turns[-1].info["strict"] = result.strict
        best = self.trajectory.best_reward
        self.trajectory.best_reward = result.reward if best is None else max(best, result.reward)
        self.save()
        return result

    def score_turn(self, rule: TurnRule) -> SubmitResult | None:
        """Score the last turn as InterCode's experiment loop did (``rule``: the language's
        ``intercode_turn``): submitted as the rule says, its feedback kept in the turn's
        ``info["feedback"]``; or, for an action the loop did not submit after, 0 without a
        submit (then None)."""
        turn = self.trajectory.turns[-1]
        plan = rule.plan(turn.action)
        if not plan.score:
            turn.reward = 0.0
            self.trajectory.best_reward = max(self.trajectory.best_reward or 0.0, 0.0)
            self.save()
            return None
        result = self.score(plan.submit_arg)
        feedback = rule.feedback(result)
        if feedback:
            turn.info["feedback"] = feedback
            self.save()
        return result

    def submit(self, arg: str | None = None) -> SubmitResult:
        """End the episode with its reward and breakdown."""
        result = self.env.submit(arg)
        traj = self.trajectory
        traj.reward, traj.breakdown, traj.gold_output = result.reward, result.breakdown, result.gold_output
        traj.strict = result.strict
        traj.best_reward = result.reward if traj.best_reward is None else max(traj.best_reward, result.reward)
        traj.status = "submitted"
        self.save()
        return result

    def stop(self, status: str = "stopped", error: str | None = None) -> None:
        self.trajectory.status = status
        self.trajectory.error = error
        self.save()
