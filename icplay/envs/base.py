"""The Env protocol: InterCode's reset / step / submit over one episode."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, runtime_checkable

from icplay.tasks.model import Task


@dataclass
class StepResult:
    """The observation of one action, plus facts the UI and the trajectory keep.

    ``observation`` is what the action printed, nothing more: icplay's notes about the
    action (truncated, timed out, shell restarted) are in ``info["notes"]``, and
    ``shown_observation`` joins the two where a reader (a model, line mode) sees one text.
    """

    observation: str
    exit_code: int | None = None
    duration: float = 0.0
    info: dict[str, Any] = field(default_factory=dict)


@dataclass
class SubmitResult:
    """The episode's reward with the breakdown that explains it."""

    reward: float
    breakdown: dict[str, Any] = field(default_factory=dict)
    gold_output: str = ""
    # The strict verdict beside InterCode's reward: {"solved": bool, "reasons": [str, ...]}.
    # None where the env has not judged (an env written before strict verdicts existed).
    strict: dict[str, Any] | None = None

    @property
    def solved(self) -> bool:
        return self.reward >= 1.0


def strict_doubts(result: "SubmitResult") -> list[str]:
    """Why InterCode's full reward is not strictly solved, one line a reason; [] when it is, or
    when the reward is below 1.0 (never strictly solved) or the env gave no verdict."""
    strict = result.strict
    if not result.solved or not isinstance(strict, dict) or strict.get("solved"):
        return []
    return [f"not strictly solved: {reason}" for reason in strict.get("reasons") or []]


def strict_verdict(reward: float, reasons: list[str] | tuple[str, ...] = ()) -> dict[str, Any]:
    """The strict verdict: solved only when the reward is 1.0 and nothing says it could be had without solving.

    ``reasons`` name what keeps a full reward from counting as strictly solved (a modified
    file whose content differs from the gold's, a gold that returns no rows, ...); a reward
    below 1.0 adds its own reason.
    """
    reasons = list(reasons)
    if reward < 1.0:
        reasons.insert(0, f"reward {reward:g} is below 1.0")
    return {"solved": not reasons, "reasons": reasons}


# What an env can do beyond reset / step / submit, declared in ``Env.capabilities`` so that
# front ends ask the env instead of probing it with ``getattr``.
STREAMS_OUTPUT = "streams_output"  # step() calls on_output with pieces of output as they come
HAS_CWD = "cwd"                    # env.cwd: the shell's working directory, for a prompt
HAS_SCHEMA = "schema"              # env.schema(): tables and columns, for a schema browser


@runtime_checkable
class Env(Protocol):
    name: str          # "bash", "sql", ...
    sandbox_kind: str  # "docker", "bwrap", "sqlite", "mysql"
    capabilities: frozenset[str]  # STREAMS_OUTPUT, HAS_CWD, HAS_SCHEMA, ...

    def reset(self, task: Task) -> str: ...

    def step(self, action: str, on_output: Callable[[str], None] | None = None) -> StepResult: ...

    def submit(self, arg: str | None = None) -> SubmitResult: ...

    def interrupt(self) -> None: ...

    def close(self) -> None: ...


def capabilities_of(env: Any) -> frozenset[str]:
    """The env's declared capabilities (none for an env written before they existed)."""
    return frozenset(getattr(env, "capabilities", ()) or ())


def render_notes(notes: list[str]) -> str:
    return "\n".join(f"[icplay: {n}]" for n in notes)


def shown_observation(observation: str, info: dict[str, Any] | None) -> str:
    """The observation followed by icplay's notes, as a model or line mode reads it."""
    text, notes = observation_parts(observation, info)
    if not notes:
        return text
    if text and not text.endswith("\n"):
        text += "\n"
    return text + render_notes(notes)


def observation_parts(observation: str, info: dict[str, Any] | None) -> tuple[str, list[str]]:
    """(what the action printed, icplay's notes) of a turn.

    Trajectories saved before notes moved to ``info`` have them appended to the
    observation too: that exact ending is taken off, so an old file reads like a new one.
    """
    notes = [str(n) for n in (info or {}).get("notes") or []]
    if notes:
        rendered = render_notes(notes)
        if observation.endswith(rendered):
            observation = observation[:len(observation) - len(rendered)]
    return observation, notes


def parse_submit(action: str) -> tuple[bool, str | None]:
    """Is this action InterCode's ``submit`` (optionally ``submit <arg>``)?"""
    text = action.strip()
    if text == "submit":
        return True, None
    if text.startswith("submit ") and "\n" not in text:
        return True, text[len("submit "):].strip() or None
    return False, None
