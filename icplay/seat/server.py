"""The seat server: textual-serve's pieces behind a token gate (see icplay/seat/__init__.py).

textual-serve's ``Server`` builds an aiohttp application whose every route is open. Here
the application is icplay's own: one middleware (``gate``) sees every request first — the
page, the websocket, the static files, a path that does not exist — and answers 401 with
nothing else unless the request carries a valid token. The token arrives once in the link
(``/?token=...``), is swapped for an HttpOnly, SameSite=Strict cookie and a redirect to
``/`` without it (so it does not stay in the address bar or the history; always ``/``,
never the path the link had, which could name another site: ``//evil.example``), and the
cookie is checked on every later request. The websocket also checks the Origin a browser sends, so
another site open in the same browser cannot drive a seat.

What runs comes from the seat the token opens (``SeatCommands``), relayed by
``icplay.seat.relay`` (textual-serve's process, icplay's checks of what the browser sends);
a token revoked while its app runs ends that app. One app per annotator at a time: a second
tab of the same seat is refused (two processes on one queue would race for it); a
supervisor follows at most ``FOLLOWS`` episodes at once.
"""

from __future__ import annotations

import asyncio
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable
from urllib.parse import quote, urlencode, urlsplit

from aiohttp import web
from textual_serve.server import Server

from icplay.seat.commands import SeatCommands
from icplay.seat.page import SECURITY_HEADERS, app_page, episode_list
from icplay.seat.relay import relay
from icplay.study.seats import ANNOTATOR, SUPERVISOR, Seat, SeatFileError, Seats

SEAT_KEY: web.AppKey = web.AppKey("icplay_seat_server")
# where the gate leaves the request's seat for the handlers (RequestKey: aiohttp >= 3.12)
REQUEST_SEAT = web.RequestKey("icplay_seat", Seat) if hasattr(web, "RequestKey") else "icplay_seat"
UNAUTHORIZED = "401: Unauthorized\n"
FOLLOWS = 4                # a supervisor's episodes followed at once (each is an app process)


def unauthorized() -> web.Response:
    """The whole answer to a request without a valid token: no page, no hint of what is behind."""
    return web.Response(status=401, text=UNAUTHORIZED, headers={"WWW-Authenticate": 'Bearer realm="icplay"'})


@dataclass
class SeatServer:
    """Serves ``commands``' app to the holders of ``seats``' tokens, at ``public_url`` (the
    address browsers use: ``http://HOST:PORT``, or the proxy's ``https://...``).
    ``episodes`` lists the trajectory files a supervisor may follow (name -> file)."""

    seats: Seats
    commands: SeatCommands
    public_url: str
    episodes: Callable[[], dict[str, Path]] = dict
    title: str = "icplay"
    busy: set[Seat] = field(default_factory=set)
    following: Counter[Seat] = field(default_factory=Counter)
    live: set[asyncio.Task] = field(default_factory=set)   # the websocket handlers relaying an app

    @property
    def cookie(self) -> str:
        """The cookie's name carries the port: browsers send a cookie to every port of a host."""
        port = urlsplit(self.public_url).port or ""
        return f"icplay_seat{port}"

    @property
    def origin(self) -> str:
        parts = urlsplit(self.public_url)
        return f"{parts.scheme}://{parts.netloc}"

    def application(self) -> web.Application:
        app = web.Application(middlewares=[self.gate])
        app[SEAT_KEY] = self
        base = Server("icplay")                       # for where textual-serve keeps its files
        app.on_shutdown.append(self._end_sessions)
        app.add_routes([
            web.get("/", self.index, name="index"),
            web.get("/ws", self.play_socket, name="websocket"),
            web.get("/ws/follow/{name:.+}", self.follow_socket, name="follow"),
            web.static("/static", base.statics_path, name="static", append_version=False),
        ])
        return app

    # -- the gate -----------------------------------------------------------------------------

    def seat_of(self, token: str | None) -> Seat | None:
        """The seat of ``token``; None also when the seats file went bad while serving (every
        request is refused until it is mended, and each refusal says why on stderr)."""
        try:
            return self.seats.seat_of(token)
        except SeatFileError as exc:
            print(f"icplay serve: {exc}", file=sys.stderr, flush=True)
            return None

    @web.middleware
    async def gate(self, request: web.Request, handler) -> web.StreamResponse:
        token = request.query.get("token")
        if token is not None:                           # the link: swap the token for a cookie
            if self.seat_of(token) is None:
                return unauthorized()
            rest = [(k, v) for k, v in request.query.items() if k != "token"]
            location = "/" + (f"?{urlencode(rest)}" if rest else "")
            response = web.Response(status=303, headers={**SECURITY_HEADERS, "Location": location})
            response.set_cookie(self.cookie, token, httponly=True, samesite="Strict", path="/",
                                secure=self.public_url.startswith("https:"))
            return response
        seat = self.seat_of(request.cookies.get(self.cookie))
        if seat is None:
            return unauthorized()
        if request.path.startswith("/ws") and request.headers.get("Origin", self.origin) != self.origin:
            return web.Response(status=403, text="403: the page must come from this server\n")
        request[REQUEST_SEAT] = seat
        return await handler(request)

    # -- pages ----------------------------------------------------------------------------------

    async def index(self, request: web.Request) -> web.StreamResponse:
        seat: Seat = request[REQUEST_SEAT]
        if seat.role == ANNOTATOR:
            return self._app_page(request, "/ws", f"{self.title} · {seat.name}")
        name = request.query.get("follow")
        episodes = await asyncio.to_thread(self.episodes)     # a scan of files: off the loop the apps' relays share
        if name is None or name not in episodes:
            return self._episode_list(seat, name, episodes)
        return self._app_page(request, "/ws/follow/" + quote(name), f"{self.title} · following {name}")

    def _app_page(self, request: web.Request, socket_path: str, title: str) -> web.StreamResponse:
        scheme = "wss" if self.public_url.startswith("https:") else "ws"
        socket_url = f"{scheme}:{self.public_url.split(':', 1)[1].rstrip('/')}{socket_path}"
        page = app_page(title, self.public_url.rstrip("/") + "/static/", socket_url,
                        _int(request.query.get("fontsize"), 16))
        return web.Response(text=page, content_type="text/html", headers=SECURITY_HEADERS)

    def _episode_list(self, seat: Seat, asked: str | None, episodes: dict[str, Path]) -> web.Response:
        page = episode_list(self.title, seat.name, list(episodes), asked)
        return web.Response(text=page, content_type="text/html", headers=SECURITY_HEADERS)

    # -- the app's websocket ---------------------------------------------------------------------

    async def play_socket(self, request: web.Request) -> web.StreamResponse:
        seat: Seat = request[REQUEST_SEAT]
        if seat.role != ANNOTATOR:
            return web.Response(status=403, text="403: a supervisor's seat follows episodes, it does not play\n")
        if seat in self.busy:
            return web.Response(status=409, text="409: this seat is open in another tab; close that one first\n")
        self.busy.add(seat)
        try:
            return await self._relay(request, self.commands.for_seat(seat))
        finally:
            self.busy.discard(seat)

    async def follow_socket(self, request: web.Request) -> web.StreamResponse:
        seat: Seat = request[REQUEST_SEAT]
        if seat.role != SUPERVISOR:
            return web.Response(status=403, text="403: only a supervisor's seat follows episodes\n")
        path = (await asyncio.to_thread(self.episodes)).get(request.match_info["name"])
        if path is None:
            raise web.HTTPNotFound(text="no such episode\n")
        if self.following[seat] >= FOLLOWS:
            return web.Response(status=429, text=f"429: a supervisor follows at most {FOLLOWS} episodes at once\n")
        self.following[seat] += 1
        try:
            return await self._relay(request, self.commands.follow(path))
        finally:
            self.following[seat] -= 1

    async def _relay(self, request: web.Request, command: str) -> web.StreamResponse:
        """``command``'s app for this browser, for as long as the request's token opens its seat."""
        seat, token = request[REQUEST_SEAT], request.cookies.get(self.cookie)
        task = asyncio.current_task()
        if task is not None:
            self.live.add(task)
        try:
            return await relay(request, command, admitted=lambda: self.seat_of(token) == seat)
        finally:
            if task is not None:
                self.live.discard(task)

    async def _end_sessions(self, app: web.Application) -> None:
        """On Ctrl+C: cancel every relay, so that textual-serve closes its websocket and asks its
        app to quit (the app saves as its quit key would) instead of aiohttp waiting for
        browsers to leave."""
        for task in list(self.live):
            task.cancel()


def _int(value: str | None, default: int) -> int:
    try:
        return max(6, min(48, int(value))) if value is not None else default
    except ValueError:
        return default


def serve(server: SeatServer, host: str, port: int, say: Callable[[str], None] = print) -> None:
    """Run until SIGINT/SIGTERM. No access log: a login link carries its token in the URL."""
    web.run_app(server.application(), host=host, port=port, access_log=None, print=say,
                handle_signals=True)
