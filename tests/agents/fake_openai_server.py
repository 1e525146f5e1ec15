"""A local OpenAI-compatible chat server with scripted replies, for tests and benchmarks.

It speaks just enough of the API for the real ``openai`` client: ``POST
/v1/chat/completions`` (plain, or streamed as server-sent events when the request says
``stream: true`` — a server made with ``streaming=False`` ignores that and answers in one
piece, as some local servers do) and ``GET /v1/models``. What it answers is decided
by a *responder*, a function of the request body returning a :class:`Reply` (or a plain
string, the reply's content). A reply can also be an HTTP error (429 with Retry-After,
500, ...), a delay longer than the client's timeout, or a malformed body.

Responders:
- :class:`Script` — replies in order, one per request (thread-safe);
- :class:`ByTask` — per task (matched by a substring of the first user message), the n-th
  reply for the n-th turn, n = the number of assistant messages in the request; stateless,
  so parallel episodes can share it.

Run it by hand (e.g. for ``icplay run --base-url``)::

    python tests/agents/fake_openai_server.py --rules rules.json --port 8765 --latency 0.3

where rules.json is ``{"<query substring>": ["reply 1", "reply 2"], "*": ["submit"]}``.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable


@dataclass
class Reply:
    content: str | None = ""
    status: int = 200
    delay: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)
    body: str | None = None            # raw body, sent as is (malformed replies)
    error: dict[str, Any] | None = None  # the "error" object of an error body
    usage: bool = True                 # include a usage block
    finish_reason: str = "stop"
    chunk_delay: float = 0.0           # streamed: seconds between chunks
    chunk_size: int = 4                # streamed: characters per chunk
    hold: threading.Event | None = None  # answer only once this is set (a model "thinking" until the test says)
    hold_after: int = 0                # streamed: the chunks sent before holding (0: hold before the headers)


def rate_limited(retry_after: float | None = 0.01) -> Reply:
    headers = {"retry-after": str(retry_after)} if retry_after is not None else {}
    return Reply(None, 429, headers=headers, error={"message": "Rate limit reached, slow down", "type": "requests",
                                                    "code": "rate_limit_exceeded"})


def server_error(status: int = 500) -> Reply:
    return Reply(None, status, error={"message": "The server had an error", "type": "server_error"})


def fenced(code: str, label: str = "sql") -> str:
    return f"```{label}\n{code}\n```"


Responder = Callable[[dict], "Reply | str"]


class Script:
    """Replies in order, one per request; after the last, ``then`` (default: the last again)."""

    def __init__(self, replies: list["Reply | str"], then: "Reply | str | None" = None):
        self.replies = list(replies)
        self.then = then
        self._lock = threading.Lock()
        self._i = 0

    def __call__(self, request: dict) -> "Reply | str":
        with self._lock:
            i = self._i
            self._i += 1
        if i < len(self.replies):
            return self.replies[i]
        if self.then is not None:
            return self.then
        return self.replies[-1] if self.replies else "submit"


def first_user_message(request: dict) -> str:
    for m in request.get("messages", []):
        if m.get("role") == "user":
            return str(m.get("content") or "")
    return ""


def turn_of(request: dict) -> int:
    return sum(1 for m in request.get("messages", []) if m.get("role") == "assistant")


class ByTask:
    """Replies by task and turn: ``rules[substring][turn]``; ``"*"`` is the default rule."""

    def __init__(self, rules: dict[str, list["Reply | str"]], default: "Reply | str" = "submit"):
        self.rules = rules
        self.default = default

    def __call__(self, request: dict) -> "Reply | str":
        text = first_user_message(request)
        turn = turn_of(request)
        for key, replies in self.rules.items():
            if key != "*" and key in text:
                return replies[turn] if turn < len(replies) else (replies[-1] if replies else self.default)
        replies = self.rules.get("*")
        if replies:
            return replies[turn] if turn < len(replies) else replies[-1]
        return self.default


class _Handler(BaseHTTPRequestHandler):
    server: "FakeOpenAIServer._HTTP"
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:   # quiet
        pass

    def _send(self, status: int, body: str, headers: dict[str, str] | None = None) -> None:
        data = body.encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def do_GET(self) -> None:
        fake = self.server.fake
        if self.path.rstrip("/").endswith("/models"):
            models = fake.models or ["scripted"]
            self._send(200, json.dumps({"object": "list", "data": [{"id": m, "object": "model"} for m in models]}))
            return
        self._send(404, json.dumps({"error": {"message": f"no route {self.path}"}}))

    def do_POST(self) -> None:
        fake = self.server.fake
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send(404, json.dumps({"error": {"message": f"no route {self.path}", "code": "not_found"}}))
            return
        try:
            request = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            self._send(400, json.dumps({"error": {"message": "invalid JSON"}}))
            return
        with fake._cond:
            fake.requests.append(request)
            fake._cond.notify_all()
        if fake.api_key is not None and self.headers.get("Authorization") != f"Bearer {fake.api_key}":
            self._send(401, json.dumps({"error": {"message": "Incorrect API key provided.",
                                                  "type": "invalid_request_error", "code": "invalid_api_key"}}))
            return
        model = request.get("model", "")
        if fake.models is not None and model not in fake.models:
            self._send(404, json.dumps({"error": {"message": f"The model `{model}` does not exist.",
                                                  "type": "invalid_request_error", "code": "model_not_found"}}))
            return
        if request.get("stream") and fake.streaming == "refuse":
            self._send(400, json.dumps({"error": {"message": "Unrecognized request argument supplied: stream_options",
                                                  "type": "invalid_request_error"}}))
            return
        reply = fake.responder(request)
        if isinstance(reply, str) or reply is None:
            reply = Reply(reply)
        delay = fake.latency + reply.delay
        if delay:
            time.sleep(delay)
        if reply.hold is not None and not (request.get("stream") and fake.streaming and reply.hold_after):
            reply.hold.wait(30)
        if reply.body is not None:
            self._send(reply.status, reply.body, reply.headers)
            return
        if reply.status != 200:
            self._send(reply.status, json.dumps({"error": reply.error or {"message": "error"}}), reply.headers)
            return
        prompt_tokens = sum(4 + len(str(m.get("content") or "")) // 4 for m in request.get("messages", []))
        completion_tokens = 1 + len(reply.content or "") // 4
        body: dict[str, Any] = {
            "id": f"chatcmpl-{len(fake.requests)}", "object": "chat.completion", "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": reply.content},
                         "finish_reason": reply.finish_reason}],
        }
        if reply.usage:
            body["usage"] = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                             "total_tokens": prompt_tokens + completion_tokens}
        if request.get("stream") and fake.streaming:
            include_usage = bool((request.get("stream_options") or {}).get("include_usage"))
            self._stream(body, reply, include_usage)
            return
        with fake._lock:
            fake.served += 1
        self._send(200, json.dumps(body), reply.headers)

    def _stream(self, body: dict, reply: Reply, include_usage: bool) -> None:
        """The reply as server-sent events, ``chunk_size`` characters a chunk (chunked encoding)."""
        fake = self.server.fake
        content = reply.content or ""
        size = max(1, reply.chunk_size)
        pieces = [content[i:i + size] for i in range(0, len(content), size)] or [""]
        base = {"id": body["id"], "object": "chat.completion.chunk", "created": body["created"], "model": body["model"]}
        events = []
        for n, piece in enumerate(pieces):
            delta = {"role": "assistant", "content": piece} if n == 0 else {"content": piece}
            events.append({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
        events.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": reply.finish_reason}]})
        if include_usage and reply.usage:
            events.append({**base, "choices": [], "usage": body["usage"]})
        delay = reply.chunk_delay if reply.chunk_delay else fake.chunk_delay
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            for k, v in reply.headers.items():
                self.send_header(k, v)
            self.end_headers()
            for n, event in enumerate(events):
                if n and delay:
                    time.sleep(delay)
                if reply.hold is not None and reply.hold_after and n == reply.hold_after:
                    reply.hold.wait(30)
                self._chunk(f"data: {json.dumps(event)}\n\n")
            with fake._lock:       # counted before the end, so a client that has read it all sees it
                fake.served += 1
                fake.streamed += 1
            self._chunk("data: [DONE]\n\n")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            with fake._lock:
                fake.disconnects += 1
            self.close_connection = True

    def _chunk(self, text: str) -> None:
        data = text.encode()
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()


class FakeOpenAIServer:
    """``with FakeOpenAIServer(responder) as server: ... server.url ...``"""

    class _HTTP(ThreadingHTTPServer):
        daemon_threads = True
        fake: "FakeOpenAIServer"

        def handle_error(self, request, client_address) -> None:   # a client that hung up: not news
            pass

    def __init__(self, responder: Responder | None = None, api_key: str | None = None,
                 models: list[str] | None = None, latency: float = 0.0, port: int = 0,
                 streaming: bool | str = True, chunk_delay: float = 0.0):
        self.responder = responder or Script(["submit"])
        self.api_key = api_key
        self.models = models
        self.latency = latency
        self.requests: list[dict] = []
        self.served = 0
        self.streaming = streaming          # False: answer stream requests in one JSON piece; "refuse": 400
        self.chunk_delay = chunk_delay      # seconds between streamed chunks (all replies)
        self.streamed = 0                   # replies sent as a stream, to the end
        self.disconnects = 0                # streams the client hung up on
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._http = self._HTTP(("127.0.0.1", port), _Handler)
        self._http.fake = self
        self._thread: threading.Thread | None = None

    def wait_requests(self, n: int, timeout: float = 10.0) -> bool:
        """Block until ``n`` requests have arrived (a test's way to know the model is "thinking")."""
        with self._cond:
            return self._cond.wait_for(lambda: len(self.requests) >= n, timeout)

    @property
    def port(self) -> int:
        return self._http.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> "FakeOpenAIServer":
        self._thread = threading.Thread(target=self._http.serve_forever, kwargs={"poll_interval": 0.02},
                                        name="fake-openai", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._http.shutdown()
        self._http.server_close()

    def __enter__(self) -> "FakeOpenAIServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(description="a scripted OpenAI-compatible chat server")
    p.add_argument("--rules", help='JSON file: {"query substring": ["reply per turn", ...], "*": [...]}')
    p.add_argument("--port", type=int, default=8765)
    p.add_argument("--latency", type=float, default=0.0, help="seconds before each answer")
    args = p.parse_args(argv)
    rules = json.loads(open(args.rules, encoding="utf-8").read()) if args.rules else {"*": ["submit"]}
    server = FakeOpenAIServer(ByTask(rules), latency=args.latency, port=args.port)
    print(f"serving scripted replies at {server.url}", flush=True)
    try:
        server._http.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
