"""Keep a chat within the model's context: trim long observations, then fold old turns.

How (in this order, stopping as soon as the estimate fits ``max_tokens``):

1. every observation longer than ``max_observation_chars`` keeps its head (2/3) and tail
   (1/3) with a ``[... N characters cut ...]`` marker in between — always applied;
2. observations of old turns (all but the last ``keep_recent``) are replaced, oldest
   first, by a one-line stub ``[output of N lines / M characters omitted]``;
3. old exchanges (the assistant's reply and the observation after it) are dropped,
   oldest first, replaced by one note saying how many turns were left out.

The system message, the task message and the last ``keep_recent`` exchanges are never
dropped. Tokens are estimated as characters / 4 (plus a few per message), which is close
enough for English and code with the tokenizers in use and needs no tokenizer download;
the API's own usage figures are what icplay reports.
"""

from __future__ import annotations

from dataclasses import dataclass

Message = dict


@dataclass
class ContextLimits:
    max_tokens: int = 12000            # estimated prompt tokens
    max_observation_chars: int = 4000  # per observation, always
    keep_recent: int = 3               # exchanges kept whole whatever happens


def estimate_tokens(messages: list[Message]) -> int:
    return sum(4 + len(m.get("content") or "") // 4 for m in messages)


def cut_middle(text: str, limit: int) -> str:
    if limit <= 0 or len(text) <= limit:
        return text
    head = (limit * 2) // 3
    tail = limit - head
    cut = len(text) - head - tail
    return f"{text[:head]}\n[... {cut} characters cut ...]\n{text[-tail:] if tail else ''}"


@dataclass
class Exchange:
    """One turn as messages: what the assistant said, what it was told back."""

    assistant: str | None
    user: str
    observation: str = ""    # the part of ``user`` that may be stubbed out
    prefix: str = ""         # text of ``user`` before the observation
    suffix: str = ""         # text of ``user`` after the observation

    def messages(self) -> list[Message]:
        out = []
        if self.assistant:      # an empty reply is never sent back (some servers refuse it)
            out.append({"role": "assistant", "content": self.assistant})
        out.append({"role": "user", "content": self.user})
        return out

    def with_note(self, note: str) -> "Exchange":
        """This exchange with ``note`` (an instruction) after what it tells the model."""
        return Exchange(self.assistant, f"{self.user}\n\n{note}", self.observation, self.prefix,
                        f"{self.suffix}\n\n{note}")

    def stubbable(self) -> bool:
        return bool(self.observation) and len(self.observation) > 80

    def stubbed(self) -> "Exchange":
        """This exchange with its observation replaced by a one-line stub."""
        stub = stub_of(self.observation)
        return Exchange(self.assistant, self.prefix + stub + self.suffix, stub, self.prefix, self.suffix)


def stub_of(observation: str) -> str:
    lines = observation.count("\n") + 1
    return f"[output of {lines} line(s) / {len(observation)} characters omitted]"


def observation_block(observation: str) -> str:
    return observation if observation.strip() else "(no output)"


def fit(head: list[Message], exchanges: list[Exchange], tail: list[Message], limits: ContextLimits) -> list[Message]:
    """``head`` (system + task) + exchanges + ``tail`` (a final instruction), trimmed to fit."""
    def build(exs: list[Exchange], dropped: int) -> list[Message]:
        msgs = list(head)
        if dropped:
            msgs.append({"role": "user", "content": f"[icplay: {dropped} earlier turn(s) left out to fit the context]"})
        for ex in exs:
            msgs.extend(ex.messages())
        msgs.extend(tail)
        return merge_roles(msgs)

    exs = list(exchanges)
    msgs = build(exs, 0)
    if estimate_tokens(msgs) <= limits.max_tokens:
        return msgs
    old = max(0, len(exs) - limits.keep_recent)
    for i in range(old):
        if exs[i].stubbable():
            exs[i] = exs[i].stubbed()
            msgs = build(exs, 0)
            if estimate_tokens(msgs) <= limits.max_tokens:
                return msgs
    dropped = 0
    while len(exs) > limits.keep_recent:
        exs.pop(0)
        dropped += 1
        msgs = build(exs, dropped)
        if estimate_tokens(msgs) <= limits.max_tokens:
            return msgs
    return msgs


def merge_roles(messages: list[Message]) -> list[Message]:
    """Join consecutive messages of the same role (some chat templates require alternation);
    tool calls and tool results are never joined (each answers its own call)."""
    out: list[Message] = []
    for m in messages:
        if out and out[-1]["role"] == m["role"] and m["role"] in ("user", "assistant") and _plain(m) and _plain(out[-1]):
            out[-1] = {"role": m["role"], "content": out[-1]["content"] + "\n\n" + m["content"]}
        else:
            out.append(dict(m))
    return out


def _plain(message: Message) -> bool:
    return isinstance(message.get("content"), str) and not message.get("tool_calls")
