"""Reading a model's reply in whatever shape its server sends it.

Servers disagree on where the parts of a reply go:
- the answer: ``content`` as a string, or as a list of parts (``{"type": "text", "text"}``,
  Mistral) — thinking parts in that list (``{"type": "thinking", "thinking": ...}``) are reasoning;
- the reasoning: ``reasoning`` (vLLM, OpenRouter, Ollama), ``reasoning_content`` (DeepSeek,
  SGLang, llama.cpp), or ``<think>…</think>`` inside the content (local reasoning models; a
  lone ``</think>`` when the template opened the tag itself);
- tool calls: ``tool_calls``, streamed in pieces keyed by ``index`` (the id and name come
  once, the arguments a few characters at a time).

``ReplyReader`` takes streamed chunks (or one whole message) and keeps the three apart, so
that code inside reasoning is never taken for the action. As a stream arrives it tells the
caller each piece with its kind (``on_content`` / ``on_reasoning``), splitting ``<think>``
tags on the fly.
"""

from __future__ import annotations

import re
from typing import Any, Callable

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
_THINK_BLOCK = re.compile(r"<think>(.*?)</think>", re.S)
REASONING_FIELDS = ("reasoning", "reasoning_content")
THINKING_PART_TYPES = ("thinking", "reasoning")


def field_of(obj: Any, name: str) -> Any:
    """``obj.name`` or ``obj[name]`` (client objects, extra fields and plain JSON alike)."""
    if obj is None:
        return None
    if isinstance(obj, dict):
        return obj.get(name)
    value = getattr(obj, name, None)
    if value is None:
        extra = getattr(obj, "model_extra", None)
        if isinstance(extra, dict):
            value = extra.get(name)
    return value


def parts_text(content: Any) -> tuple[str, str]:
    """(text, thinking) of a content that is a string, a list of parts, or nothing."""
    if content is None:
        return "", ""
    if isinstance(content, str):
        return content, ""
    if not isinstance(content, list):
        return str(content), ""
    text: list[str] = []
    thinking: list[str] = []
    for part in content:
        if isinstance(part, str):
            text.append(part)
            continue
        kind = field_of(part, "type")
        if kind in THINKING_PART_TYPES:
            inner = field_of(part, kind) or field_of(part, "text")
            thinking.append(parts_text(inner)[0] if isinstance(inner, list) else str(inner or ""))
        elif kind in (None, "text", "output_text"):
            text.append(str(field_of(part, "text") or ""))
    return "".join(text), "".join(thinking)


def split_think(text: str) -> tuple[str, str]:
    """(answer, reasoning) of a content that may hold ``<think>…</think>`` (or a lone
    ``</think>``, or a ``<think>`` never closed because the reply was cut)."""
    reasoning: list[str] = []

    def keep(match: re.Match) -> str:
        reasoning.append(match.group(1).strip())
        return ""

    answer = _THINK_BLOCK.sub(keep, text)
    if THINK_CLOSE in answer:            # the opening tag was in the prompt template
        before, _, answer = answer.rpartition(THINK_CLOSE)
        reasoning.insert(0, before.replace(THINK_OPEN, "").strip())
    if THINK_OPEN in answer:             # opened, never closed: all thinking
        answer, _, rest = answer.partition(THINK_OPEN)
        reasoning.append(rest.strip())
    return answer.strip(), "\n\n".join(r for r in reasoning if r)


class ThinkSplitter:
    """Splits streamed content into answer and ``<think>`` reasoning as it arrives."""

    def __init__(self):
        self._buffer = ""
        self._state = "start"            # start | think | answer

    def feed(self, piece: str) -> list[tuple[str, str]]:
        """[(kind, text)] with kind ``content`` or ``reasoning``, ready to show."""
        self._buffer += piece
        out: list[tuple[str, str]] = []
        while self._buffer:
            if self._state == "start":
                head = self._buffer.lstrip()
                if not head or (len(head) < len(THINK_OPEN) and THINK_OPEN.startswith(head)):
                    return out             # could still become <think>
                if head.startswith(THINK_OPEN):
                    self._state, self._buffer = "think", head[len(THINK_OPEN):]
                else:
                    self._state = "answer"
            elif self._state == "think":
                at = self._buffer.find(THINK_CLOSE)
                if at < 0:
                    safe = len(self._buffer) - (len(THINK_CLOSE) - 1)
                    if safe > 0:
                        out.append(("reasoning", self._buffer[:safe]))
                        self._buffer = self._buffer[safe:]
                    return out
                if at:
                    out.append(("reasoning", self._buffer[:at]))
                self._state, self._buffer = "answer", self._buffer[at + len(THINK_CLOSE):].lstrip("\n")
            else:
                out.append(("content", self._buffer))
                self._buffer = ""
        return out

    def flush(self) -> list[tuple[str, str]]:
        rest, self._buffer = self._buffer, ""
        if not rest:
            return []
        return [("reasoning" if self._state == "think" else "content", rest)]


class ReplyReader:
    """Accumulates one reply: answer text, reasoning, tool calls, finish reason, usage, ids."""

    def __init__(self, on_content: Callable[[str], None] | None = None,
                 on_reasoning: Callable[[str], None] | None = None):
        self.on_content = on_content
        self.on_reasoning = on_reasoning
        self.content: list[str] = []
        self.reasoning: list[str] = []
        self.calls: dict[int, dict[str, str]] = {}
        self.finish_reason: str | None = None
        self.usage: Any = None
        self.model: str | None = None
        self.id: str | None = None
        self.first_piece_at: float | None = None
        self._think = ThinkSplitter()

    # -- streamed ------------------------------------------------------------------------
    def chunk(self, chunk: Any, now: float) -> None:
        self.model = field_of(chunk, "model") or self.model
        self.id = field_of(chunk, "id") or self.id
        usage = field_of(chunk, "usage")
        if usage is not None:
            self.usage = usage
        for choice in field_of(chunk, "choices") or []:
            if (field_of(choice, "index") or 0) != 0:
                continue
            delta = field_of(choice, "delta")
            got = self._take(delta, streamed=True)
            if got and self.first_piece_at is None:
                self.first_piece_at = now
            self.finish_reason = field_of(choice, "finish_reason") or self.finish_reason

    # -- whole ---------------------------------------------------------------------------
    def message(self, response: Any) -> None:
        self.model = field_of(response, "model") or self.model
        self.id = field_of(response, "id") or self.id
        self.usage = field_of(response, "usage")
        choices = field_of(response, "choices")
        if not choices:
            raise MalformedReply("the reply has no choices")
        choice = choices[0]
        message = field_of(choice, "message")
        if message is None:
            raise MalformedReply("the reply's first choice has no message")
        self._take(message, streamed=False)
        self.finish_reason = field_of(choice, "finish_reason")

    def _take(self, part: Any, streamed: bool) -> bool:
        """Take one delta (or message); True when it carried anything of the reply."""
        if part is None:
            return False
        got = self._take_reasoning(part)
        text, thinking = parts_text(field_of(part, "content"))
        if thinking:
            self._emit("reasoning", thinking)
            got = True
        if text:
            got = True
            if streamed:
                for kind, piece in self._think.feed(text):
                    self._emit(kind, piece)
            else:
                self.content.append(text)
        return self._take_calls(part) or got

    def _take_reasoning(self, part: Any) -> bool:
        """The reasoning fields servers send beside the content; True when one had text."""
        got = False
        for name in REASONING_FIELDS:
            value = field_of(part, name)
            if isinstance(value, str) and value:
                self._emit("reasoning", value)
                got = True
        return got

    def _take_calls(self, part: Any) -> bool:
        """Tool calls, or their streamed pieces, added to their slots by index; True when any came."""
        calls = field_of(part, "tool_calls") or []
        for n, call in enumerate(calls):
            index = field_of(call, "index")
            index = n if index is None else int(index)
            slot = self.calls.setdefault(index, {"id": "", "name": "", "arguments": ""})
            function = field_of(call, "function")
            slot["id"] = field_of(call, "id") or slot["id"]
            slot["name"] = slot["name"] or (field_of(function, "name") or "")
            arguments = field_of(function, "arguments")
            if arguments:
                slot["arguments"] += arguments if isinstance(arguments, str) else _json(arguments)
        return bool(calls)

    def _emit(self, kind: str, text: str) -> None:
        if kind == "reasoning":
            self.reasoning.append(text)
            if self.on_reasoning is not None:
                self.on_reasoning(text)
        else:
            self.content.append(text)
            if self.on_content is not None:
                self.on_content(text)

    def finish(self) -> None:
        for kind, piece in self._think.flush():
            self._emit(kind, piece)

    # -- results -------------------------------------------------------------------------
    def parts(self) -> tuple[str, str]:
        """(answer, reasoning): think tags taken out of the answer."""
        answer, thought = split_think("".join(self.content))
        reasoning = "".join(self.reasoning).strip()
        if thought and thought not in reasoning:
            reasoning = f"{reasoning}\n\n{thought}".strip() if reasoning else thought
        return answer, reasoning

    def tool_calls(self) -> list[dict[str, str]]:
        return [self.calls[i] for i in sorted(self.calls)]

    @property
    def empty(self) -> bool:
        return not self.content and not self.reasoning and not self.calls


class MalformedReply(Exception):
    """A reply icplay cannot read (retried like a server error)."""


def _json(value: Any) -> str:
    import json

    return json.dumps(value)


def usage_numbers(usage: Any) -> dict[str, Any]:
    """prompt / completion / reasoning / cached token counts of a usage block, and the
    router's ``cost`` when it sends one (None: not given)."""
    def num(value: Any) -> int | None:
        return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    if usage is None:
        return {"prompt_tokens": None, "completion_tokens": None, "reasoning_tokens": None, "cached_tokens": None,
                "cost": None}
    done = field_of(usage, "completion_tokens_details")
    prompt = field_of(usage, "prompt_tokens_details")
    cost = field_of(usage, "cost")      # a router's own charge (OpenRouter), in dollars
    return {"prompt_tokens": num(field_of(usage, "prompt_tokens")),
            "completion_tokens": num(field_of(usage, "completion_tokens")),
            "reasoning_tokens": num(field_of(done, "reasoning_tokens")) if done is not None else None,
            "cached_tokens": num(field_of(prompt, "cached_tokens")) if prompt is not None else None,
            "cost": float(cost) if isinstance(cost, (int, float)) and not isinstance(cost, bool) and cost >= 0
            else None}
