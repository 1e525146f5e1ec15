"""Reading a model server's error, whatever shape its body has.

Servers that speak OpenAI's protocol disagree on how an error looks:

| shape | who sends it |
|-------|--------------|
| ``{"error": {"message", "type", "param", "code"}}`` | OpenAI, Azure, OpenRouter, SGLang, llama.cpp |
| ``[{"error": {"code", "message", "status"}}]`` (a list) | Gemini's OpenAI-compatible endpoint |
| ``{"type": "error", "error": {"type", "message"}}`` | Anthropic's OpenAI-compatible endpoint |
| ``{"object": "error", "message", "type", "param", "code"}`` | vLLM |
| ``{"error": "text"}`` / plain text | Ollama, proxies, load balancers |

``error_object`` reduces each to one flat dict (``message`` always a string when one was
said), so the one-sentence errors and the refusal reader (``families.Refusal``) see the
same thing. ``names_bad_key`` finds a rejected key in a 400 or 403 (Gemini answers a bad
key with 400 ``API_KEY_INVALID``), so that a bad key stops the run at its first call.
"""

from __future__ import annotations

import json
import re
from typing import Any

_BAD_KEY = re.compile(r"api[ _-]?key (is )?not valid|api_key_invalid|invalid[ _-]?(x-)?api[ _-]?key|"
                      r"incorrect api key|no auth credentials|invalid authentication|unauthenticated", re.I)


def error_object(body: Any) -> dict[str, Any]:
    """The error a response body carries, as one flat dict (empty when it carries none)."""
    if isinstance(body, (bytes, bytearray)):
        body = body.decode("utf-8", "replace")
    if isinstance(body, str):
        return _from_text(body.strip())
    if isinstance(body, list):
        first = next((item for item in body if isinstance(item, dict)), None)
        return error_object(first) if first is not None else {}
    return _from_dict(body) if isinstance(body, dict) else {}


def _from_text(text: str) -> dict[str, Any]:
    """A body as text: JSON read as such, anything else the message itself (a proxy's page)."""
    try:
        parsed = json.loads(text)
    except ValueError:
        return {"message": text[:500]} if text else {}
    return error_object(parsed) if isinstance(parsed, (dict, list)) else {"message": text[:500]}


def _from_dict(body: dict[str, Any]) -> dict[str, Any]:
    inner = body.get("error")
    if isinstance(inner, dict):
        return _flat(inner)
    if isinstance(inner, str):
        return {"message": inner, **{k: body[k] for k in ("code", "type", "param") if body.get(k) is not None}}
    if body.get("object") == "error" or "message" in body or "detail" in body:
        return _flat(body)
    return {}


def _flat(err: dict[str, Any]) -> dict[str, Any]:
    out = dict(err)
    message = err.get("message") if err.get("message") is not None else err.get("detail")
    if isinstance(message, (dict, list)):
        message = json.dumps(message)[:500]
    if message is not None:
        out["message"] = str(message)
    if out.get("code") is None and err.get("status") is not None:
        out["code"] = err["status"]       # Gemini: "status": "INVALID_ARGUMENT"
    return out


def exception_body(exc: Exception) -> dict[str, Any]:
    """The error object of an openai exception (its parsed body, else its response's text)."""
    found = error_object(getattr(exc, "body", None))
    if found:
        return found
    response = getattr(exc, "response", None)
    try:
        return error_object(response.text) if response is not None else {}
    except RuntimeError:       # httpx's ResponseNotRead: a streamed response that was never read has
        return {}              # no text to quote; the exception's own text is said instead


def error_message(exc: Exception) -> str:
    """What the server said, in its own words (the exception's text when it said nothing)."""
    message = exception_body(exc).get("message")
    if message:
        return str(message)
    return str(getattr(exc, "message", None) or exc)


def error_code(exc: Exception) -> str:
    err = exception_body(exc)
    return str(err.get("code") or err.get("type") or "")


def names_bad_key(exc: Exception) -> bool:
    """Does the error say the API key is wrong (in whatever status it came)?"""
    return bool(_BAD_KEY.search(f"{error_message(exc)} {error_code(exc)} {json.dumps(exception_body(exc))[:800]}"))


__all__ = ["error_object", "exception_body", "error_message", "error_code", "names_bad_key"]
