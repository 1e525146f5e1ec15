"""What line mode says: its help lines, tables, observations and rewards as plain text.

Every line that quotes what others wrote goes through ``display`` (icplay/frontend/display.py)
before it is printed; how a language's reward is explained is its spec's (``explain_lines``).
"""

from __future__ import annotations

from typing import Any, Sequence

from icplay.envs.base import SubmitResult, observation_parts, render_notes, shown_observation, strict_doubts
from icplay.episode import STEP_LABELS, Turn
from icplay.frontend.display import display
from icplay.languages import find

HUMAN_HELP = """commands: submit (score and go on), :skip (next task without scoring), :label, :quit, :help"""
LABEL_COMMAND = ":label"
LABEL_HELP = f":label {'|'.join(STEP_LABELS)} [NOTE] labels the last turn (process supervision: icplay export steps)"
AGENT_HELP = ("decide: [enter] run it · e ACTION run ACTION instead · r COMMENT reject · t take over · "
              "s submit · q (or :quit) stop · :label good|bad|neutral [NOTE] the last turn · ? help")
CONTROL_HELP = ("any time: :auto :confirm :human switch mode · :pause after this step · :step one step · "
                ":go go on · :stop")
PAUSED_HELP = "paused: [enter] go on · n one step · t take over · s submit · q stop"
INVALID_HELP = "decide: [enter] ask again · e ACTION run ACTION · t take over · s submit · q stop"
FAILED_HELP = "decide: [enter] try again · t take over · s submit · q stop"
WATCH_HUMAN_HELP = HUMAN_HELP.replace(":quit", ":agent (hand back to the agent), :quit")
NO_AGENT = "there is no agent here (icplay watch lets one work)"

INVALID_LINES = {"truncated": "the model's reply was cut at the token limit; what it held was not run",
                 "reasoning_only": "the model's reply held only reasoning, no answer"}
TRUNCATED_NOTE = "(truncated: the reply was cut at the token limit, finish_reason length; raise --max-tokens)"


def format_table(columns: list[str], rows: Sequence[Sequence[Any]], limit: int = 50) -> str:
    """A plain text table of the first ``limit`` rows."""
    shown = [tuple("NULL" if v is None else str(v) for v in row) for row in rows[:limit]]
    widths = [len(c) for c in columns]
    for row in shown:
        widths = [max(w, len(v)) for w, v in zip(widths, row)]

    def line(values: Sequence[str]) -> str:
        return " | ".join(v.ljust(w) for v, w in zip(values, widths))

    out = [line(columns), "-+-".join("-" * w for w in widths)] + [line(r) for r in shown]
    if len(rows) > limit:
        out.append(f"... {len(rows) - limit} more rows")
    out.append(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")
    return "\n".join(out)


def describe_observation(turn: Turn, env_name: str) -> str:
    info = turn.info
    if info.get("columns") is not None and info.get("rows") is not None:
        text = format_table(info["columns"], info["rows"])
        notes = observation_parts(turn.observation, info)[1]
        if info.get("truncated") and not notes:
            notes = ["result truncated at the row limit"]
        return text + ("\n" + render_notes(notes) if notes else "")
    text = shown_observation(turn.observation, info).rstrip("\n")
    if turn.exit_code not in (0, None):
        text += f"\n[exit {turn.exit_code}]"
    return text


def describe_reward(result: SubmitResult, env_name: str | None = None) -> str:
    """The reward, whether it is strictly solved, and its parts as the language explains them."""
    lines = [f"reward: {result.reward:.2f}" + ("  (solved)" if result.solved else "")]
    if isinstance(result.strict, dict) and result.solved:
        lines[0] += "  strictly solved" if result.strict.get("solved") else "  NOT strictly solved"
        lines += [f"  {doubt}" for doubt in strict_doubts(result)]
    spec = find(env_name) if env_name else None
    return "\n".join(lines + (spec.explain_lines(result.breakdown) if spec is not None else []))


def invalid_note(turn: Turn) -> str:
    """Why a reply ran nothing, as the transcript says it."""
    why = turn.info.get("invalid_reason")
    if why == "truncated":
        return "(the reply was cut at the token limit; what it held was not run)"
    if why == "reasoning_only":
        return "(the reply held only reasoning, no answer)"
    return display(f"(the reply held no action: {str(turn.info.get('raw') or '').strip()[:300]})")


__all__ = ["format_table", "describe_observation", "describe_reward", "invalid_note", "HUMAN_HELP", "AGENT_HELP",
           "CONTROL_HELP", "PAUSED_HELP", "LABEL_HELP", "LABEL_COMMAND"]
