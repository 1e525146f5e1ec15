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

Provider behaviours (``checks=[...]``, each a function of the request returning a reply
that replaces the responder's, or None): :func:`openai_reasoning_refusals` (OpenAI's
reasoning models refuse ``max_tokens``, a temperature other than 1 and ``stop``, with the
documented error shapes), :func:`context_limit` (a 400 ``context_length_exceeded`` past a
number of tokens) and :func:`reasoning_budget` (a router that renamed the budget: a
model that spends a small budget thinking answers with empty content and
``finish_reason: "length"``). A reply can carry reasoning (``reasoning`` in the field
``reasoning_field``), content as a list of parts (``parts``), tool calls (streamed in pieces),
an error chunk in the middle of the stream (``stream_error_after``), no usage, a stream cut
without a finish reason (``cut_after``), keep-alive comments forever (``keepalive``: OpenRouter's
``: OPENROUTER PROCESSING``), a raw or plain-text error body in any provider's shape (``body``,
``content_type``) and OpenRouter's ``usage.cost``. ``azure_deployment`` makes it an Azure
deployment endpoint (its path, ``api-version`` and ``api-key`` header).

Run it by hand (e.g. for ``icplay run --base-url``)::

    python tests/agents/fake_openai_server.py --rules rules.json --port 8765 --latency 0.3

where rules.json is ``{"<query substring>": ["reply 1", "reply 2"], "*": ["submit"]}`` (a reply
may also be an object of :class:`Reply`'s fields, e.g. ``{"content": "...", "reasoning": "..."}``).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable
from urllib.parse import parse_qs, urlsplit


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
    reasoning: str | None = None       # the model's thinking, sent in ``reasoning_field``
    reasoning_field: str = "reasoning"  # reasoning (vLLM, OpenRouter) | reasoning_content (DeepSeek, SGLang)
    parts: list[dict] | None = None    # content as a list of parts (Mistral), instead of ``content``
    tool_calls: list[dict] | None = None  # [{"id", "name", "arguments"}]; streamed a few characters at a time
    stream_error_after: int | None = None  # streamed: an error chunk after this many chunks (OpenRouter)
    reasoning_tokens: int | None = None   # usage.completion_tokens_details.reasoning_tokens
    cached_tokens: int | None = None      # usage.prompt_tokens_details.cached_tokens
    model: str | None = None           # the model named in the response (default: the request's)
    cut_after: int | None = None       # streamed: the connection ends cleanly after this many chunks, with no
    #                                    finish_reason (and no [DONE] unless ``done_marker``): a cut stream
    done_marker: bool = False          # with cut_after: still send [DONE]
    abrupt: bool = False               # with cut_after: hang up without ending the chunked body (a dropped connection)
    keepalive: float | None = None     # send SSE comments (": OPENROUTER PROCESSING") every so many seconds,
    #                                    before anything else, until ``keepalive_for`` seconds or the client hangs up
    keepalive_for: float = 30.0
    content_type: str = "application/json"   # of an error or raw body (text/plain: a proxy's page)
    usage_cost: float | None = None    # usage.cost, as OpenRouter sends it (dollars)


def rate_limited(retry_after: float | None = 0.01) -> Reply:
    headers = {"retry-after": str(retry_after)} if retry_after is not None else {}
    return Reply(None, 429, headers=headers, error={"message": "Rate limit reached, slow down", "type": "requests",
                                                    "code": "rate_limit_exceeded"})


def server_error(status: int = 500) -> Reply:
    return Reply(None, status, error={"message": "The server had an error", "type": "server_error"})


def _error(message: str, param: str | None, code: str) -> dict[str, Any]:
    return {"message": message, "type": "invalid_request_error", "param": param, "code": code}


REASONING_MODEL_PREFIXES = ("o1", "o3", "o4", "gpt-5")


def openai_reasoning_refusals(request: dict) -> "Reply | None":
    """OpenAI's reasoning models (o-series, gpt-5 family), as documented: ``max_tokens``, a
    temperature other than 1 and ``stop`` are refused with a 400."""
    model = str(request.get("model", "")).rsplit("/", 1)[-1]
    return _reasoning_refusal(request) if model.startswith(REASONING_MODEL_PREFIXES) else None


def deployment_refusals(*names: str) -> Callable[[dict], "Reply | None"]:
    """An Azure deployment of a reasoning model, named by its owner (no table can know the name)."""
    def check(request: dict) -> "Reply | None":
        return _reasoning_refusal(request) if request.get("model") in names else None
    return check


def _reasoning_refusal(request: dict) -> "Reply | None":
    if "max_tokens" in request:
        return Reply(None, 400, error=_error("Unsupported parameter: 'max_tokens' is not supported with this model. "
                                             "Use 'max_completion_tokens' instead.", "max_tokens",
                                             "unsupported_parameter"))
    if "temperature" in request and request["temperature"] != 1:
        value = request["temperature"]
        shown = int(value) if float(value).is_integer() else value
        return Reply(None, 400, error=_error(f"Unsupported value: 'temperature' does not support {shown} with this "
                                             "model. Only the default (1) value is supported.", "temperature",
                                             "unsupported_value"))
    if "stop" in request:
        return Reply(None, 400, error=_error("Unsupported parameter: 'stop' is not supported with this model.",
                                             "stop", "unsupported_parameter"))
    return None


def prompt_tokens_of(request: dict) -> int:
    return sum(4 + len(str(m.get("content") or "")) // 4 for m in request.get("messages", []))


def context_limit(limit: int) -> Callable[[dict], "Reply | None"]:
    """A model with a ``limit``-token context (prompt + budget), refusing longer requests as OpenAI does."""
    def check(request: dict) -> "Reply | None":
        prompt = prompt_tokens_of(request)
        budget = int(request.get("max_completion_tokens") or request.get("max_tokens") or 0)
        if prompt + budget <= limit:
            return None
        return Reply(None, 400, error=_error(
            f"This model's maximum context length is {limit} tokens. However, you requested {prompt + budget} tokens "
            f"({prompt} in the messages, {budget} in the completion). Please reduce the length of the messages or "
            "completion.", "messages", "context_length_exceeded"))
    return check


def reasoning_budget(needed: int, thinking: str = "Let me think about the schema first.") -> Callable[[dict], "Reply | None"]:
    """A reasoning model behind a router that renamed the budget: with fewer than ``needed``
    tokens it thinks until the budget is gone and answers nothing (``finish_reason: length``)."""
    def check(request: dict) -> "Reply | None":
        budget = int(request.get("max_completion_tokens") or request.get("max_tokens") or 0)
        if budget >= needed:
            return None
        return Reply("", finish_reason="length", reasoning=thinking, reasoning_tokens=budget)
    return check


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


RETRY_MARK = "[icplay] "


def turn_of(request: dict) -> int:
    """The turn a request asks for: its assistant messages, plus the replies icplay did not send
    back because they held no text (their retry note joins a user message after its start)."""
    turn = 0
    for m in request.get("messages", []):
        content = str(m.get("content") or "")
        if m.get("role") == "assistant":
            turn += 1
        elif m.get("role") == "user":
            turn += content.count(RETRY_MARK) - (1 if content.startswith(RETRY_MARK) else 0)
    return turn


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

    def _send(self, status: int, body: str, headers: dict[str, str] | None = None,
              content_type: str = "application/json") -> None:
        data = body.encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
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
        route = urlsplit(self.path)
        with fake._lock:
            fake.paths.append(self.path)
            fake.headers.append({k.lower(): v for k, v in self.headers.items()})
        if not route.path.rstrip("/").endswith("/chat/completions") or not fake.route_ok(route):
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
        if fake.api_key is not None and not fake.key_ok(self.headers):
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
        reply = None
        for check in fake.checks:
            reply = check(request)
            if reply is not None:
                break
        if reply is None:
            reply = fake.responder(request)
        if isinstance(reply, str) or reply is None:
            reply = Reply(reply)
        delay = fake.latency + reply.delay
        if delay:
            time.sleep(delay)
        if reply.hold is not None and not (request.get("stream") and fake.streaming and reply.hold_after):
            reply.hold.wait(30)
        if reply.keepalive and not self._keep_alive(reply, bool(request.get("stream") and fake.streaming)):
            return
        if reply.body is not None:
            self._send(reply.status, reply.body, reply.headers, reply.content_type)
            return
        if reply.status != 200:
            self._send(reply.status, json.dumps({"error": reply.error or {"message": "error"}}), reply.headers)
            return
        prompt_tokens = prompt_tokens_of(request)
        completion_tokens = 1 + (len(reply.content or "") + len(reply.reasoning or "")) // 4
        message: dict[str, Any] = {"role": "assistant", "content": reply.parts if reply.parts is not None
                                   else reply.content}
        if reply.reasoning is not None:
            message[reply.reasoning_field] = reply.reasoning
        if reply.tool_calls:
            message["tool_calls"] = [{"id": c["id"], "type": "function",
                                      "function": {"name": c["name"], "arguments": c["arguments"]}}
                                     for c in reply.tool_calls]
        body: dict[str, Any] = {
            "id": f"chatcmpl-{len(fake.requests)}", "object": "chat.completion", "created": int(time.time()),
            "model": reply.model or model,
            "choices": [{"index": 0, "message": message, "finish_reason": reply.finish_reason}],
        }
        if reply.usage:
            body["usage"] = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                             "total_tokens": prompt_tokens + completion_tokens}
            if reply.reasoning_tokens is not None:
                body["usage"]["completion_tokens_details"] = {"reasoning_tokens": reply.reasoning_tokens}
            if reply.cached_tokens is not None:
                body["usage"]["prompt_tokens_details"] = {"cached_tokens": reply.cached_tokens}
            if reply.usage_cost is not None:
                body["usage"]["cost"] = reply.usage_cost
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
        size = max(1, reply.chunk_size)

        def cut(text: str) -> list[str]:
            return [text[i:i + size] for i in range(0, len(text), size)]

        base = {"id": body["id"], "object": "chat.completion.chunk", "created": body["created"], "model": body["model"]}
        deltas: list[dict[str, Any]] = [{reply.reasoning_field: piece} for piece in cut(reply.reasoning or "")]
        if reply.parts is not None:
            deltas += [{"content": [part]} for part in reply.parts]
        else:
            deltas += [{"content": piece} for piece in cut(reply.content or "")]
        for index, call in enumerate(reply.tool_calls or []):
            deltas.append({"tool_calls": [{"index": index, "id": call["id"], "type": "function",
                                           "function": {"name": call["name"], "arguments": ""}}]})
            deltas += [{"tool_calls": [{"index": index, "function": {"arguments": piece}}]}
                       for piece in cut(call["arguments"])]
        deltas = deltas or [{"content": ""}]
        deltas[0] = {"role": "assistant", **deltas[0]}
        events = [{**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]} for delta in deltas]
        if reply.cut_after is not None:               # the connection ends in the middle of the reply
            events = events[:reply.cut_after]
        elif reply.stream_error_after is not None:    # OpenRouter's mid-stream error: an error chunk, then the end
            events = events[:reply.stream_error_after]
            events.append({**base, "error": {"code": 502, "message": "Provider returned error"},
                           "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "error"}]})
        else:
            events.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": reply.finish_reason}]})
        if include_usage and reply.usage and reply.stream_error_after is None and reply.cut_after is None:
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
            if reply.cut_after is not None and reply.abrupt:
                self.connection.shutdown(socket.SHUT_RDWR)
                self.close_connection = True
                return
            with fake._lock:       # counted before the end, so a client that has read it all sees it
                fake.served += 1
                fake.streamed += 1
            if reply.cut_after is None or reply.done_marker:
                self._chunk("data: [DONE]\n\n")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            with fake._lock:
                fake.disconnects += 1
            self.close_connection = True

    def _keep_alive(self, reply: Reply, streaming: bool) -> bool:
        """Keep the connection open with what servers send while they wait (SSE comments on a
        stream, blank lines before a JSON body) for ``keepalive_for`` seconds; False when the
        client hung up (nothing more to send). Then the connection is closed: a server that
        never answers."""
        fake = self.server.fake
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream" if streaming else "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            until = time.monotonic() + reply.keepalive_for
            while time.monotonic() < until:
                self._chunk(": OPENROUTER PROCESSING\n\n" if streaming else "\n")
                time.sleep(reply.keepalive or 0.1)
        except (BrokenPipeError, ConnectionResetError, OSError):
            with fake._lock:
                fake.disconnects += 1
        self.close_connection = True
        return False

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
                 streaming: bool | str = True, chunk_delay: float = 0.0,
                 checks: list[Callable[[dict], "Reply | None"]] | None = None,
                 azure_deployment: str | None = None):
        self.responder = responder or Script(["submit"])
        # Azure: only /openai/deployments/<this>/chat/completions?api-version=..., the key in an api-key header
        self.azure_deployment = azure_deployment
        self.paths: list[str] = []            # each request's path and query
        self.headers: list[dict[str, str]] = []  # each request's headers (lower-case names)
        self.checks = list(checks or [])      # provider behaviours, tried before the responder
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

    def route_ok(self, route: Any) -> bool:
        if self.azure_deployment is None:
            return True
        version = parse_qs(route.query).get("api-version")
        return route.path.rstrip("/") == f"/openai/deployments/{self.azure_deployment}/chat/completions" \
            and bool(version)

    def key_ok(self, headers: Any) -> bool:
        if self.azure_deployment is not None:
            return headers.get("api-key") == self.api_key
        return headers.get("Authorization") == f"Bearer {self.api_key}"

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
    p.add_argument("--chunk-delay", type=float, default=0.0, help="seconds between streamed chunks")
    p.add_argument("--openai-reasoning", action="store_true",
                   help="refuse max_tokens / temperature / stop for o-series and gpt-5 models, as OpenAI does")
    args = p.parse_args(argv)
    rules = json.loads(open(args.rules, encoding="utf-8").read()) if args.rules else {"*": ["submit"]}
    rules = {key: [Reply(**r) if isinstance(r, dict) else r for r in replies] for key, replies in rules.items()}
    checks = [openai_reasoning_refusals] if args.openai_reasoning else []
    server = FakeOpenAIServer(ByTask(rules), latency=args.latency, port=args.port, chunk_delay=args.chunk_delay,
                              checks=checks)
    return serve_until_interrupted(server, "scripted replies")


def serve_until_interrupted(server: "FakeOpenAIServer", what: str) -> int:
    """Run a fake server in the foreground (by hand, for watching in a terminal) until Ctrl+C."""
    print(f"serving {what} at {server.url}", flush=True)
    try:
        server._http.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
