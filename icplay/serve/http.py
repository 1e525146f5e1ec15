"""How an icplay server runs on uvicorn: the options every server of icplay passes it.

The Guard (``guard.py``) sees a request only once uvicorn has read its whole head, and uvicorn
bounds a head's arrival nowhere (its keep-alive timer starts after a response): a client that
sends ``GET / HTTP/1.1`` and never the blank line held its connection forever, before any
token check, and a few thousand such held every file descriptor (slowloris). So each
connection's head must arrive within ``HEAD_TIMEOUT`` seconds, on the first request and on each
later one of a kept-alive connection; then it is closed.
"""

from __future__ import annotations

import asyncio
from typing import Any

HEAD_TIMEOUT = 30.0   # seconds for a request's line and headers to arrive whole


def _head_bound_protocol(head_timeout: float) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol, closing a connection whose request head is not whole in time."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class HeadBoundH11Protocol(H11Protocol):
        _head_timer: asyncio.TimerHandle | None = None

        def _arm_head_timer(self) -> None:
            self._cancel_head_timer()
            self._head_timer = self.loop.call_later(head_timeout, self._head_overdue)

        def _cancel_head_timer(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_overdue(self) -> None:
            self._head_timer = None
            if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
                self.transport.close()

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm_head_timer()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self.conn.their_state is not h11.IDLE:     # the head is whole: the request is the app's
                self._cancel_head_timer()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():          # a kept-alive connection's next head
                self._arm_head_timer()

        def connection_lost(self, exc: Exception | None) -> None:
            self._cancel_head_timer()
            super().connection_lost(exc)

    return HeadBoundH11Protocol


def uvicorn_options(max_body: int, head_timeout: float = HEAD_TIMEOUT) -> dict[str, Any]:
    """Keyword arguments for ``uvicorn.run`` / ``uvicorn.Config``: the bounded head, and WebSocket
    messages capped at ``max_body`` bytes."""
    return {"http": _head_bound_protocol(head_timeout), "ws_max_size": max_body}
