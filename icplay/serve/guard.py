"""The door of an icplay server: who may talk to it, and how much they may send.

``Guard`` wraps any ASGI app (HTTP and WebSocket alike) and refuses, before the app sees
anything:

- a Host header that is not a name of this server (a loopback name, the bound address, a name
  the operator allowed): a web page that re-points its own DNS name at 127.0.0.1 (DNS
  rebinding) sends its own name as Host;
- an Origin header of another site: browsers send one on every WebSocket handshake and on
  cross-site requests; clients that are not browsers send none, so none is fine;
- a missing or wrong ``Authorization: Bearer TOKEN`` when the server has a token;
- an HTTP body over ``max_body`` bytes (413), or one that does not arrive within
  ``read_timeout`` seconds (408); a WebSocket message over ``max_body`` ends the socket (1009).

Each refusal is OpenEnv's error JSON (``{"detail": sentence}``; on a WebSocket handshake the
same body where the server supports denial responses, a 403 otherwise). No framework import:
the guard is plain ASGI.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import json
import re
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, MutableMapping
from urllib.parse import urlsplit

from icplay.json_shape import DuplicateKeyError, loads

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})
DEFAULT_MAX_BODY = 1 << 20          # 1 MiB: an action, a task id and a few options fit many times over
DEFAULT_READ_TIMEOUT = 30.0         # seconds for a request body to arrive whole
WS_MESSAGE_TOO_BIG = 1009


def is_loopback(host: str) -> bool:
    """``host`` (a name or an address, IPv6 with or without brackets) is this machine only."""
    name = host.strip("[]").lower()
    if name in LOOPBACK_NAMES or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _is_wildcard(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_unspecified
    except ValueError:
        return False


# What a Host header holds (RFC 9110): a name, an IPv4 address or a bracketed IPv6 one, and a
# port. urlsplit would read ``evil@127.0.0.1`` as user ``evil`` at loopback; such a header is refused.
_HOST_FORM = re.compile(r"(?:[A-Za-z0-9._~!$&'()*+,;=%-]+|\[[0-9A-Fa-f:.]+(?:%[A-Za-z0-9._~-]+)?\])(?::[0-9]{0,5})?")


def _hostname(netloc: str) -> str:
    """The name part of ``host[:port]`` / ``[v6][:port]``, lower-cased."""
    try:
        return (urlsplit(f"//{netloc}").hostname or "").lower()
    except ValueError:
        return ""


@dataclass(frozen=True)
class DoorPolicy:
    """Who may come in: the address the server is bound to, the names it answers to, its token."""

    bound: str = "127.0.0.1"
    token: str | None = None
    allowed_hosts: tuple[str, ...] = ()
    max_body: int = DEFAULT_MAX_BODY
    read_timeout: float = DEFAULT_READ_TIMEOUT
    names: frozenset[str] = field(init=False)

    def __post_init__(self) -> None:
        if self.token is not None and not self.token.strip():
            raise ValueError("the token is empty: give a token of some length, or none")
        if not is_loopback(self.bound) and self.token is None:
            raise ValueError(f"listening on {self.bound} (beyond this machine) needs a token: --token, "
                             "or $ICPLAY_SERVE_TOKEN")
        if self.max_body < 1:
            raise ValueError("the body cap must be at least 1 byte")
        names = {name.strip("[]").lower() for name in (self.bound, *self.allowed_hosts)}
        object.__setattr__(self, "names", frozenset(names))

    def host_refusal(self, host: str | None) -> str | None:
        """None when ``host`` (a Host header) names this server, else why not."""
        if not host:
            return "the request has no Host header"
        if not _HOST_FORM.fullmatch(host):
            return (f"the Host {host!r} is not a name and a port (user names, paths and spaces have no "
                    "place in a Host header)")
        name = _hostname(host)
        if is_loopback(name) or name in self.names:
            return None
        if _is_wildcard(self.bound) and _is_ip(name):
            return None
        return (f"the Host {host!r} is not a name of this server (a page that points its own name at this "
                "machine is refused; the operator can allow a name with --allow-host)")

    def origin_refusal(self, origin: str | None, host: str | None) -> str | None:
        """None for no Origin (not a browser) or the server's own, else why not."""
        if origin is None:
            return None
        parts = urlsplit(origin) if origin != "null" else None
        if parts is None or parts.scheme not in ("http", "https") or not host or parts.netloc.lower() != host.lower():
            return f"requests from the web page of {origin!r} are refused (a browser's cross-site request)"
        return None

    def token_refusal(self, authorization: str | None) -> str | None:
        if self.token is None:
            return None
        scheme, _, given = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not given:
            return "this server needs its token: send 'Authorization: Bearer TOKEN'"
        if not hmac.compare_digest(given.strip().encode(), self.token.encode()):
            return "the token is wrong"
        return None


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        return False


def _headers(scope: Scope) -> dict[str, str]:
    """The request's headers, lower-cased names; a header sent twice keeps its first value."""
    out: dict[str, str] = {}
    for raw_name, raw_value in scope.get("headers") or []:
        out.setdefault(raw_name.decode("latin-1").lower(), raw_value.decode("latin-1"))
    return out


class Guard:
    """``app`` behind ``policy``: see the module docstring."""

    def __init__(self, app: ASGIApp, policy: DoorPolicy):
        self.app, self.policy = app, policy

    @property
    def state(self) -> Any:
        """The wrapped app's state (Starlette's ``app.state``), for whoever serves it."""
        return getattr(self.app, "state", None)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope.get("type")
        if kind not in ("http", "websocket"):
            await self.app(scope, receive, send)   # lifespan
            return
        refusal = self.refusal(scope)
        if refusal is not None:
            status, sentence = refusal
            if kind == "http":
                await send_json(send, status, {"detail": sentence})
            else:
                await deny_websocket(scope, send, status, sentence)
            return
        if kind == "http":
            await self._http(scope, receive, send)
        else:
            await self.app(scope, self._bounded_messages(receive, send), send)

    def refusal(self, scope: Scope) -> tuple[int, str] | None:
        headers = _headers(scope)
        host = headers.get("host")
        why = self.policy.host_refusal(host)
        if why is not None:
            return 403, why
        why = self.policy.origin_refusal(headers.get("origin"), host)
        if why is not None:
            return 403, why
        why = self.policy.token_refusal(headers.get("authorization"))
        if why is not None:
            return 401, why
        return None

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Read the body whole (bounded in size and time) before the app runs, then replay it."""
        limit = self.policy.max_body
        declared = _headers(scope).get("content-length")
        too_big = f"the request body is over this server's limit of {limit:,} bytes"
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await send_json(send, 413, {"detail": too_big})
            return
        chunks, size = [], 0
        try:
            async with asyncio.timeout(self.policy.read_timeout):
                while True:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        return
                    chunk = message.get("body", b"")
                    size += len(chunk)
                    if size > limit:
                        await send_json(send, 413, {"detail": too_big})
                        return
                    chunks.append(chunk)
                    if not message.get("more_body", False):
                        break
        except TimeoutError:
            await send_json(send, 408, {"detail": f"the request body did not arrive within "
                                                  f"{self.policy.read_timeout:g} s"})
            return
        body, replayed = b"".join(chunks), False
        twice = _stated_twice(body)
        if twice is not None:
            await send_json(send, 400, {"detail": twice})
            return

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    def _bounded_messages(self, receive: Receive, send: Send) -> Receive:
        limit = self.policy.max_body

        async def bounded() -> Message:
            message = await receive()
            if message["type"] == "websocket.receive":
                size = len(message.get("bytes") or b"") + len((message.get("text") or "").encode())
                if size > limit:
                    await send({"type": "websocket.close", "code": WS_MESSAGE_TOO_BIG,
                                "reason": f"a message is over the limit of {limit:,} bytes"})
                    return {"type": "websocket.disconnect", "code": WS_MESSAGE_TOO_BIG}
            return message

        return bounded


def _stated_twice(body: bytes) -> str | None:
    """Why a JSON body that states a key twice is refused (JSON leaves it to each reader which
    one counts: a seed or a task read one way here and another by a proxy that checked it);
    None for any other body, which the route reads and answers itself."""
    if b"{" not in body:
        return None
    try:
        loads(body)
    except DuplicateKeyError as exc:
        return f"the request body: {exc.field} is stated twice, so the request is refused"
    except ValueError:      # not JSON, or a number icplay does not read: the route says so (422)
        return None
    return None


async def send_json(send: Send, status: int, body: dict[str, Any]) -> None:
    data = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="icplay"'))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})


async def deny_websocket(scope: Scope, send: Send, status: int, sentence: str) -> None:
    """Refuse a WebSocket handshake: the status and sentence as an HTTP answer where the server
    supports it (uvicorn does), else a plain close (the client sees 403)."""
    if "websocket.http.response" in (scope.get("extensions") or {}):
        data = json.dumps({"detail": sentence}).encode()
        await send({"type": "websocket.http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]})
        await send({"type": "websocket.http.response.body", "body": data})
        return
    await send({"type": "websocket.close", "code": 1008})
