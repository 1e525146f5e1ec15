"""The websocket between a browser's terminal and one app process.

textual-serve's ``AppService`` starts and feeds the process; this loop, icplay's own rather
than textual-serve's ``Server.handle_websocket``, decides what of the browser's reaches it.
That one passes a resize of any size (a width of 10**9 has the app draw a screen of that many
cells: the machine's memory, and every other seat's app with it), a message of up to 4 MiB,
and the server's whole environment to the process. Here: only the messages the terminal page
sends (``stdin``, ``resize``, ``ping``, ``focus``, ``blur``), each of its own shape, a
screen's size within ``COLUMNS`` and ``ROWS``, messages up to ``MAX_MESSAGE``, the
environment of ``icplay.seat.environment``; when the process ends (a crash too) the page is
told, and ``admitted`` is asked every ``RECHECK_SECONDS`` so a revoked token ends its app.
"""

from __future__ import annotations

import asyncio
import json
from typing import Awaitable, Callable

from aiohttp import WSMsgType, web
from textual_serve.app_service import AppService
from textual_serve.download_manager import DownloadManager

from icplay.seat.environment import kept_environment

MAX_MESSAGE = 1 << 20                 # a burst of keys or a paste; the whole of a SQL file fits
COLUMNS, ROWS = (20, 400), (8, 200)   # the largest screen a browser window shows, and more
PING_CHARACTERS = 64
RECHECK_SECONDS = 1.0


def terminal_size(width: object, height: object) -> tuple[int, int]:
    """A size the app may draw: numbers outside the screen's bounds are brought inside,
    anything else is the terminal's 80x24."""
    return _bounded(width, COLUMNS, 80), _bounded(height, ROWS, 24)


def _bounded(value: object, bounds: tuple[int, int], default: int) -> int:
    if isinstance(value, bool):
        return default
    try:
        number = int(value) if isinstance(value, (int, str)) else default
    except ValueError:
        return default
    return max(bounds[0], min(bounds[1], number))


class SeatProcess(AppService):
    """textual-serve's app process with icplay's environment, whose end closes the page."""

    def _build_environment(self, width: int = 80, height: int = 24) -> dict[str, str]:
        return kept_environment(super()._build_environment(width=width, height=height))

    async def run(self) -> None:
        await super().run()
        await self.remote_close()


Deliver = Callable[[object, SeatProcess, web.WebSocketResponse], Awaitable[None]]


async def _stdin(data: object, process: SeatProcess, socket: web.WebSocketResponse) -> None:
    if isinstance(data, str):
        await process.send_bytes(data.encode("utf-8", "replace"))


async def _resize(data: object, process: SeatProcess, socket: web.WebSocketResponse) -> None:
    if isinstance(data, dict):
        await process.set_terminal_size(*terminal_size(data.get("width"), data.get("height")))


async def _ping(data: object, process: SeatProcess, socket: web.WebSocketResponse) -> None:
    if isinstance(data, str) and len(data) <= PING_CHARACTERS:
        await socket.send_json(["pong", data])


async def _focus(data: object, process: SeatProcess, socket: web.WebSocketResponse) -> None:
    await process.focus()


async def _blur(data: object, process: SeatProcess, socket: web.WebSocketResponse) -> None:
    await process.blur()


MESSAGES: dict[str, Deliver] = {"stdin": _stdin, "resize": _resize, "ping": _ping, "focus": _focus, "blur": _blur}


async def deliver(text: str, process: SeatProcess, socket: web.WebSocketResponse) -> None:
    """One message of the page's, to the process if it is one the page sends; else nothing."""
    try:
        envelope = json.loads(text)
    except ValueError:
        return
    if isinstance(envelope, list) and envelope and isinstance(envelope[0], str) and envelope[0] in MESSAGES:
        await MESSAGES[envelope[0]](envelope[1] if len(envelope) > 1 else None, process, socket)


async def relay(request: web.Request, command: str, admitted: Callable[[], bool]) -> web.WebSocketResponse:
    """Run ``command`` for the browser of ``request`` until either side ends, or ``admitted``
    (the seat's token still valid) turns false."""
    socket = web.WebSocketResponse(heartbeat=15, max_msg_size=MAX_MESSAGE)
    await socket.prepare(request)

    async def close_page() -> None:
        await socket.close()

    process = SeatProcess(command, write_bytes=socket.send_bytes, write_str=socket.send_str, close=close_page,
                          download_manager=DownloadManager())
    watch = asyncio.create_task(_close_unless(admitted, socket))
    try:
        await process.start(*terminal_size(request.query.get("width"), request.query.get("height")))
        async for message in socket:
            if message.type == WSMsgType.TEXT:
                await deliver(message.data, process, socket)
    except asyncio.CancelledError:      # the server stops: the page is closed, the app asked to quit
        await socket.close()
    finally:
        watch.cancel()
        await process.stop()
    return socket


async def _close_unless(admitted: Callable[[], bool], socket: web.WebSocketResponse) -> None:
    while not socket.closed:
        await asyncio.sleep(RECHECK_SECONDS)
        if not admitted():
            await socket.close(message=b"the seat's token was revoked")
            return
