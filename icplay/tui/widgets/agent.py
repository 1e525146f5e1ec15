"""The agent panel of the watch screen: what the model thinks and proposes, as it writes it.

A view only: the watch screen feeds it from the driver's events (``set_state``,
``set_mode``, ``add_delta``, ``add_reasoning``, ``show_proposal``, ``show_failure``,
``set_usage``) and it keeps nothing but what it draws. Streamed text is redrawn at most every
50 ms, so a model that writes fast never delays a key press.

The model's reasoning streams in its own style above the reply: its latest lines while the
model thinks, folded to one line once the proposal is there; ``toggle_reasoning`` (Alt+R)
shows it whole or folds it again.
"""

from __future__ import annotations

import time

from rich.console import Group
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Static

from icplay.tui.shown import safe, shown
from icplay.tui.highlight import highlighted

# state -> (label, style)
STATES = {
    "idle": ("idle", "dim"),
    "starting": ("starting", "dim"),
    "thinking": ("thinking…", "cyan"),
    "waiting": ("waiting for you", "bold yellow"),
    "paused": ("paused", "yellow"),
    "running": ("running", "green"),
    "scoring": ("scoring", "magenta"),
    "failed": ("failed", "bold red"),
    "done": ("done", "dim"),
}

REASONING_STYLE = "italic #8787af"     # the model's thinking: its own colour, never taken for the reply
REASONING_HEAD = "dim #8787af"
REASONING_TAIL_LINES, REASONING_TAIL_CHARS = 4, 400
TRUNCATED_LINE = "✂ truncated: the reply was cut at the token limit (finish_reason length); raise --max-tokens"

MODE_STYLE = {"auto": "green", "confirm": "yellow", "human": "magenta"}


def split_reply(text: str) -> tuple[str, str | None]:
    """A reply as it streams in: (thought, action so far), the action being the first fenced
    block (or what follows ``Action:``); None while no action has started."""
    fence = text.find("```")
    if fence >= 0:
        start = text.find("\n", fence)
        if start < 0:
            return text[:fence].rstrip(), ""
        body = text[start + 1:]
        end = body.find("```")
        return text[:fence].rstrip(), (body if end < 0 else body[:end]).rstrip("\n")
    marker = text.find("Action:")
    if marker >= 0:
        return text[:marker].rstrip(), text[marker + len("Action:"):].strip()
    return text, None


def thought_text(thought: str) -> str:
    text = thought.strip()
    for prefix in ("Thought:", "THOUGHT:"):
        if text.startswith(prefix):
            text = text[len(prefix):].strip()
    return text


class AgentPanel(Vertical):
    """State, mode, usage on top; the thought and the proposed action below; a hint line."""

    DEFAULT_CSS = """
    AgentPanel { height: auto; max-height: 50%; border: round $warning; padding: 0 1; }
    AgentPanel.-failed { border: round $error; }
    AgentPanel #agent-head { height: 1; }
    AgentPanel #agent-scroll { height: auto; max-height: 14; }
    AgentPanel #agent-body { height: auto; }
    AgentPanel #agent-hint { height: auto; color: $text-muted; }
    """

    def __init__(self, language: str = "bash", model: str = "", frozen: bool = False, cost: bool = True,
                 **kwargs):
        """``cost`` False: the dollars spent are not shown (a price per token would name the model)."""
        super().__init__(**kwargs)
        self.language = language
        self.model = model
        self.show_cost = cost
        self.frozen = frozen
        self.state = "starting"
        self.mode = "confirm"
        self.tokens: int | None = 0     # None: the server reports no usage
        self.cost: float | None = 0.0   # None: calls were made that no price covers
        self.stream = ""
        self.thought = ""
        self.action: str | None = None
        self.tool: str | None = None        # the tool the proposed action calls (tools protocol)
        self.scored: list[str] = []         # a proposed submit: what it would score (languages/submitting.py)
        self.failure: str | None = None
        self.retry_at: float | None = None
        self.reasoning = ""
        self.reasoning_open = False      # the user asked to see the whole reasoning
        self.truncated = False
        self.hint = ""
        self._dirty = False
        self.border_title = shown("Agent" + (f" · {model}" if model else ""))

    def compose(self) -> ComposeResult:
        yield Static(id="agent-head")
        with VerticalScroll(id="agent-scroll"):
            yield Static(id="agent-body")
        yield Static(id="agent-hint")

    def on_mount(self) -> None:
        self.follow()
        self.redraw()
        self.set_interval(0.05, self._flush)
        self.set_interval(1.0, self._tick)

    # -- fed by the screen ---------------------------------------------------------------------

    def set_state(self, state: str) -> None:
        self.state = state
        if state == "thinking":
            self.stream, self.thought, self.action, self.failure, self.tool = "", "", None, None, None
            self.scored = []
            self.reasoning, self.truncated = "", False
            self.retry_at = None
            self._dirty = True           # the last proposal goes: "the model is writing…"
            self.follow()
        if state not in ("failed",):
            self.remove_class("-failed")
        self._draw_head()

    def set_mode(self, mode: str) -> None:
        self.mode = mode
        self._draw_head()

    def clear_proposal(self) -> None:
        """The human took over: the agent's last proposal (and what its submit would have scored)
        is no longer on offer, so it goes from the panel."""
        self.stream, self.thought, self.action, self.tool, self.failure = "", "", None, None, None
        self.scored, self.reasoning, self.truncated, self.retry_at = [], "", False, None
        self.remove_class("-failed")
        self._draw_body()

    def set_usage(self, tokens: int | None, cost: float | None) -> None:
        """``tokens`` None: the server reported no usage; ``cost`` None: calls were made that no price covers."""
        self.tokens, self.cost = tokens, cost
        self._draw_head()

    def add_delta(self, text: str) -> None:
        """A piece of the model's reply: drawn on the next 50 ms tick."""
        self.stream += text
        self.thought, self.action = split_reply(self.stream)
        self._dirty = True

    def add_reasoning(self, text: str) -> None:
        """A piece of the model's thinking: drawn on the next 50 ms tick, in its own style."""
        self.reasoning += text
        self._dirty = True

    def reset_stream(self) -> None:
        """A retried call: what the failed attempt streamed is gone."""
        self.stream, self.reasoning, self.thought, self.action = "", "", "", None
        self._dirty = True

    def toggle_reasoning(self) -> None:
        self.reasoning_open = not self.reasoning_open
        self._draw_body()

    def show_proposal(self, thought: str | None, action: str | None, submit: bool = False,
                      reasoning: str | None = None, truncated: bool = False, tool: str | None = None,
                      scored: list[str] | None = None) -> None:
        """A proposal; ``tool``: the tool it calls (tools protocol), shown above it; ``scored``: for a
        submit, what it would score, shown below it."""
        self.scored = list(scored or [])
        self.thought = thought or (self.thought if self.stream else "")
        if "</think>" in self.thought:       # a lone closing tag: what came before it was reasoning
            self.thought = self.thought.rsplit("</think>", 1)[1]
        self.action = "submit" if submit and not action else action
        self.tool = tool
        self.reasoning = reasoning or self.reasoning
        self.truncated = truncated
        self.failure = None
        self._dirty = False
        self.follow()
        self._draw_body()

    def show_failure(self, message: str, raw: str | None = None, retry_in: float | None = None,
                     reasoning: str | None = None, truncated: bool = False) -> None:
        """A failure: bad key, unreachable server, rate limit (``retry_in``), unparsable reply (``raw``)."""
        self.failure = message
        if reasoning is not None:
            self.reasoning = reasoning
        self.truncated = truncated
        self.retry_at = time.monotonic() + retry_in if retry_in else None
        if raw is not None:
            self.thought, self.action = raw, None
        if retry_in is None:
            self.state = "failed"
            self.add_class("-failed")
        self._draw_head()
        self._draw_body()

    def follow(self) -> None:
        """Keep the body scrolled to its end (the proposed action is last) until the user scrolls:
        in a short panel the action stays in view below a long thought."""
        if self.is_mounted:
            self.query_one("#agent-scroll", VerticalScroll).anchor()

    def set_hint(self, hint: str) -> None:
        self.hint = hint
        self.query_one("#agent-hint", Static).update(shown(hint))

    # -- drawing ---------------------------------------------------------------------------------

    def redraw(self) -> None:
        self._draw_head()
        self._draw_body()
        self.set_hint(self.hint)

    def _flush(self) -> None:
        if self._dirty:
            self._dirty = False
            self._draw_body()

    def _tick(self) -> None:
        if self.retry_at is not None:
            self._draw_body()

    def head_text(self) -> Text:
        label, style = STATES.get(self.state, (self.state, ""))
        text = Text()
        text.append(label, style=style)
        text.append("  mode ", style="dim")
        text.append(self.mode, style=f"bold {MODE_STYLE.get(self.mode, '')}")
        text.append("  ? tok" if self.tokens is None else f"  {self.tokens:,} tok", style="dim")
        if self.show_cost:
            text.append("  $?" if self.cost is None else f"  ${self.cost:.4f}", style="dim")
        return text

    def _draw_head(self) -> None:
        if self.is_mounted:
            self.query_one("#agent-head", Static).update(self.head_text())

    def _failure_line(self, failure: str) -> Text:
        """The failure in red, with the countdown to the next attempt when one is coming."""
        line = shown(failure, style="bold red")
        if self.retry_at is not None:
            left = max(0.0, self.retry_at - time.monotonic())
            line.append(f" · retrying in {left:.0f}s", style="yellow")
        return line

    def _action_parts(self, action: str) -> list[Text]:
        """The proposed action (the tool it calls first), and what a submit would score."""
        parts = []
        if self.tool:
            parts.append(shown(f"⚙ tool call: {self.tool}", style="bold cyan"))
        if action.strip() == "submit":
            parts.append(Text("▶ submit", style="bold magenta"))
        else:
            parts.append(highlighted(action or " ", self.language))
        if self.scored:
            parts.append(shown("\n".join(self.scored), style="yellow"))
        return parts

    def body(self):
        parts = []
        if self.failure:
            parts.append(self._failure_line(self.failure))
        if self.reasoning.strip():
            parts.append(self.reasoning_text())
        if self.truncated:
            parts.append(Text(TRUNCATED_LINE, style="bold yellow"))
        thought = thought_text(self.thought)
        if thought:
            parts.append(shown(thought, style="italic"))
        if self.action is not None:
            parts.extend(self._action_parts(self.action))
        if not parts:
            waiting = {"thinking": "the model is writing…", "starting": "starting the sandbox…"}
            if self.mode == "human" and self.state not in ("starting", "done"):
                waiting[self.state] = "you have the turn · F7 hands it back to the agent"
            if self.state == "thinking" and self.tokens is None:
                waiting["thinking"] = "the model is writing… (this server reports no token usage)"
            parts.append(Text(waiting.get(self.state, ""), style="dim"))
        return Group(*parts)

    def reasoning_text(self) -> Text:
        """The reasoning: whole when asked for, its latest lines while the model thinks, else one line."""
        text = self.reasoning.strip()
        words = len(text.split())
        if self.reasoning_open:
            out = Text(f"▾ reasoning · {words} words (Alt+R folds)\n", style=REASONING_HEAD)
            out.append(safe(text), style=REASONING_STYLE)
            return out
        if self.action is None and not self.failure and not self.stream.strip():
            tail = "\n".join(text.splitlines()[-REASONING_TAIL_LINES:])[-REASONING_TAIL_CHARS:]
            out = Text(f"▾ thinking · {words} words (Alt+R shows all)\n", style=REASONING_HEAD)
            out.append(safe(tail), style=REASONING_STYLE)
            return out
        return Text(f"▸ reasoning · {words} words (Alt+R shows)", style=REASONING_HEAD)

    def _draw_body(self) -> None:
        if self.is_mounted:
            self.query_one("#agent-body", Static).update(self.body())
