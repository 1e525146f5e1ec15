"""One request to a model server, bounded in wall time and cancellable, read to its end.

The openai client's ``timeout`` bounds each read of the socket, not the request: a server
that sends something every few seconds (OpenRouter's ``: OPENROUTER PROCESSING`` comments
while it waits on a provider, a proxy's keep-alive bytes) holds it forever. So each attempt
runs on a helper thread and the caller waits for it against a wall-clock deadline and a
cancel event; at either, the open response is closed (the helper thread ends at its next
read) and the caller is free at once: ``AttemptTimedOut`` or ``Cancelled``.

What counts as a reply (``read_stream``, ``read_body``): only a finished one. A stream that
ends without a ``finish_reason`` (cut by a proxy, a crashed worker, a dropped connection:
whatever arrived may be half a command), an error chunk or ``finish_reason: "error"``, and
a 200 whose body is an error, are ``FailedReply``: the retry loop counts a failed attempt.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any, Callable

from icplay.agents.errors import error_object
from icplay.agents.replies import MalformedReply, ReplyReader, field_of
from icplay.episode import Cancelled

ERROR_FINISH = "error"


class AttemptTimedOut(Exception):
    """The attempt did not end within its wall-clock deadline (``seconds``)."""

    def __init__(self, seconds: float):
        super().__init__(f"no complete reply within {seconds:g} s")
        self.seconds = seconds


class FailedReply(Exception):
    """The server's reply says it failed, or ended before it finished (retried like a 5xx)."""


def close_quietly(response: Any) -> None:
    if response is None:
        return
    try:
        response.close()
    except Exception as exc:   # a connection that broke under it (the HTTP stack's errors: their
        if not _broken_connection(exc):   # packages are not imported): already closed; a bug is raised
            raise


def bounded(send: Callable[[dict[str, Any]], None], cancel: threading.Event | None, seconds: float | None) -> None:
    """Run ``send(handle)`` on a helper thread and wait for it: its error is raised here;
    ``Cancelled`` when ``cancel`` is set and ``AttemptTimedOut`` after ``seconds``, the
    response ``send`` put in ``handle["response"]`` closed either way."""
    box: dict[str, BaseException] = {}
    handle: dict[str, Any] = {}
    done = threading.Event()

    def work() -> None:
        try:
            send(handle)
        except BaseException as exc:   # handed to the waiting thread, which raises it
            box["error"] = exc
        finally:
            done.set()
            if handle.get("abandoned"):   # nobody waits for this answer any more
                close_quietly(handle.get("response"))

    threading.Thread(target=work, name="icplay-model-call", daemon=True).start()
    _wait_for(done, handle, cancel, seconds)
    if "error" in box:
        raise box["error"]
    if cancel is not None and cancel.is_set():
        raise Cancelled()


def _wait_for(done: threading.Event, handle: dict[str, Any], cancel: threading.Event | None,
              seconds: float | None) -> None:
    """Until ``done``; at a cancel or the deadline the attempt is abandoned (``Cancelled``, ``AttemptTimedOut``)."""
    deadline = None if seconds is None else time.monotonic() + seconds
    while not done.wait(0.05 if deadline is None else max(0.0, min(0.05, deadline - time.monotonic()))):
        if cancel is not None and cancel.is_set():
            _abandon(handle)
            raise Cancelled()
        if deadline is not None and time.monotonic() >= deadline:
            _abandon(handle)
            raise AttemptTimedOut(seconds or 0.0)


def _abandon(handle: dict[str, Any]) -> None:
    handle["abandoned"] = True
    close_quietly(handle.get("response"))


def read_stream(stream: Any, reader: ReplyReader, handle: dict[str, Any]) -> None:
    """Read server-sent chunks into ``reader`` until the stream ends; ``FailedReply`` unless
    the reply finished (a finish reason other than ``error``)."""
    import openai

    handle["response"] = stream
    try:
        for chunk in stream:
            if handle.get("abandoned"):
                raise Cancelled()
            reader.chunk(chunk, time.monotonic())
            if reader.finish_reason == ERROR_FINISH:
                raise FailedReply("the server ended the reply with finish_reason 'error'")
    except openai.APIError as exc:
        if isinstance(exc, (openai.APIStatusError, openai.APIConnectionError)):
            raise
        said = error_object(getattr(exc, "body", None)).get("message") or exc
        raise FailedReply(f"an error in the stream: {str(said)[:120]}") from None
    except Exception as exc:   # only the HTTP stack's own (not imported, so told by module): retried
        if not _broken_connection(exc):
            raise
        raise FailedReply(f"the connection broke in the middle of the reply ({type(exc).__name__})") from None
    finally:
        close_quietly(stream)
    reader.finish()
    if reader.finish_reason is None:
        raise FailedReply("the stream ended before the reply finished (no finish_reason)")


NETWORK_PACKAGES = ("httpx", "httpx2", "httpcore", "httpcore2", "h11", "anyio")


def _broken_connection(exc: BaseException) -> bool:
    """An error of the HTTP stack while a body was read (a peer that hung up mid-reply)."""
    return isinstance(exc, OSError) or type(exc).__module__.split(".")[0] in NETWORK_PACKAGES


def read_body(body: bytes, reader: ReplyReader) -> None:
    """A whole (non-streamed) reply into ``reader``: ``FailedReply`` for an error body or an
    error finish, ``MalformedReply`` for a body that is not a chat completion."""
    try:
        data = json.loads(body)
    except ValueError as exc:
        raise MalformedReply(f"unreadable body: {str(exc)[:80]}") from None
    if isinstance(data, dict) and data.get("error") is not None and not data.get("choices"):
        message = error_object(data).get("message") or "no message"
        raise FailedReply(f"an error in a 200 reply: {str(message)[:160]}")
    if not isinstance(data, dict):
        raise MalformedReply(f"the body is not a chat completion: {str(data)[:80]!r}")
    reader.message(data)
    choices = field_of(data, "choices") or [{}]
    if field_of(choices[0], "finish_reason") == ERROR_FINISH:
        raise FailedReply("the server ended the reply with finish_reason 'error'")
    if reader.finish_reason is None:
        raise FailedReply("the reply has no finish_reason (it did not finish)")


__all__ = ["AttemptTimedOut", "FailedReply", "bounded", "read_stream", "read_body", "close_quietly"]
