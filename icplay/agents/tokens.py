"""Tokens counted here when the server does not say (no ``usage`` block, or a call cut short).

A cost limit must hold against a server that sends no usage, and a call cancelled at a
limit must keep what it cost; so icplay counts the prompt and the reply itself:

- with ``tiktoken`` (when it is installed and its encoding is on this machine: tiktoken
  fetches its BPE files on first use, so a machine without the internet has them only in
  ``$TIKTOKEN_CACHE_DIR``) for the families whose tokenizer it knows — OpenAI's models;
- else an estimate of one token per four characters (each message adding four for its
  framing), the rule of thumb OpenAI documents for English text.

Either way the count is marked (``method``): a usage counted here is an estimate in the
trajectory and the table, never presented as the server's figure.
"""

from __future__ import annotations

import functools
import json
from typing import Any

CHARS_PER_TOKEN = 4
PER_MESSAGE = 4
ESTIMATE = "chars/4"
# model name (without a provider prefix) -> tiktoken encoding, for the families tiktoken knows
TIKTOKEN_FAMILIES = (("gpt-4o", "o200k_base"), ("gpt-4.1", "o200k_base"), ("gpt-5", "o200k_base"),
                     ("o1", "o200k_base"), ("o3", "o200k_base"), ("o4", "o200k_base"),
                     ("gpt-4", "cl100k_base"), ("gpt-3.5", "cl100k_base"))


@functools.lru_cache(maxsize=8)
def _encoding(name: str) -> Any:
    """The tiktoken encoding ``name``, or None (not installed, or its files cannot be had)."""
    try:
        import tiktoken

        return tiktoken.get_encoding(name)
    except (ImportError, OSError, ValueError):   # not installed, no network for its BPE file, a bad
        return None                               # download (hash): counted by the estimate instead


def encoding_for(model: str) -> tuple[str, Any]:
    """(method, encoder or None) for ``model``: tiktoken's encoding when it knows the family
    and it can be loaded, else the estimate."""
    base = model.rsplit("/", 1)[-1].lower()
    for prefix, name in TIKTOKEN_FAMILIES:
        if base.startswith(prefix):
            encoder = _encoding(name)
            if encoder is not None:
                return f"tiktoken:{name}", encoder
            break
    return ESTIMATE, None


def count_text(text: str, encoder: Any = None) -> int:
    if not text:
        return 0
    if encoder is not None:
        return len(encoder.encode(text, disallowed_special=()))
    return (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


def _message_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    text = content if isinstance(content, str) else json.dumps(content) if content else ""
    calls = message.get("tool_calls")
    return text + (json.dumps(calls) if calls else "")


def count_prompt(messages: list[dict[str, Any]], tools: list[dict] | None, encoder: Any = None) -> int:
    """Tokens of a request's messages (and its tool schemas)."""
    total = sum(PER_MESSAGE + count_text(_message_text(m), encoder) for m in messages)
    if tools:
        total += count_text(json.dumps(tools), encoder)
    return total + 3


def count_reply(text: str, reasoning: str, calls: list[dict[str, str]], encoder: Any = None) -> int:
    """Tokens of a reply (what arrived of it: a cut one counts its part)."""
    call_text = "".join(c.get("name", "") + c.get("arguments", "") for c in calls)
    return count_text(text, encoder) + count_text(reasoning, encoder) + count_text(call_text, encoder)


__all__ = ["ESTIMATE", "encoding_for", "count_text", "count_prompt", "count_reply"]
