"""Tool calls from the scripted server (``fake_openai_server``), as providers send them.

A :class:`ToolReply` is a ``Reply`` that also carries ``tool_calls`` (``call(name, args)``).
:class:`ToolServer` answers it as OpenAI does: in one piece, ``message.tool_calls`` with
``finish_reason: "tool_calls"``; streamed, each call's id and name in its first delta and
its arguments cut into pieces of ``args_chunk`` characters over the following deltas (the
client must put them together by ``index``). A server made with ``refuse_tools=True``
answers any request with ``tools`` with the 400 that servers without tool support send.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from fake_openai_server import FakeOpenAIServer, Reply, _Handler


@dataclass
class ToolReply(Reply):
    tool_calls: list[dict[str, Any]] = field(default_factory=list)   # [{"id", "name", "arguments"}]
    args_chunk: int = 7                                               # streamed: characters per arguments delta
    finish_reason: str = "tool_calls"


def call(name: str, arguments: Any, ident: str | None = None) -> dict[str, Any]:
    """One tool call; ``arguments`` a dict (sent as JSON) or a raw string (sent as is)."""
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": ident, "name": name, "arguments": args}


def calls_reply(*calls: dict[str, Any], content: str = "", **kw) -> ToolReply:
    return ToolReply(content, tool_calls=list(calls), **kw)


def _wire(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"id": c["id"] or f"call_fake_{k}", "type": "function",
             "function": {"name": c["name"], "arguments": c["arguments"]}} for k, c in enumerate(calls)]


class _ToolHandler(_Handler):
    server: "ToolServer._HTTP"

    def do_POST(self) -> None:
        self.server.fake.current.reply = None
        super().do_POST()

    def _send(self, status: int, body: str, headers: dict[str, str] | None = None) -> None:
        reply = self.server.fake.current.reply
        if status == 200 and isinstance(reply, ToolReply) and reply.tool_calls and reply.body is None:
            data = json.loads(body)
            data["choices"][0]["message"]["tool_calls"] = _wire(reply.tool_calls)
            body = json.dumps(data)
        super()._send(status, body, headers)

    def _stream(self, body: dict, reply: Reply, include_usage: bool) -> None:
        if not (isinstance(reply, ToolReply) and reply.tool_calls):
            return super()._stream(body, reply, include_usage)
        fake = self.server.fake
        base = {"id": body["id"], "object": "chat.completion.chunk", "created": body["created"], "model": body["model"]}

        def event(delta: dict, finish: str | None = None) -> dict:
            return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

        events = [event({"role": "assistant", "content": reply.content or ""})]
        size = max(1, reply.args_chunk)
        for k, c in enumerate(_wire(reply.tool_calls)):
            events.append(event({"tool_calls": [{"index": k, "id": c["id"], "type": "function",
                                                  "function": {"name": c["function"]["name"], "arguments": ""}}]}))
            args = c["function"]["arguments"]
            for i in range(0, len(args), size):
                events.append(event({"tool_calls": [{"index": k, "function": {"arguments": args[i:i + size]}}]}))
        events.append(event({}, reply.finish_reason))
        if include_usage and reply.usage:
            events.append({**base, "choices": [], "usage": body["usage"]})
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            delay = reply.chunk_delay or fake.chunk_delay
            for n, e in enumerate(events):
                if n and delay:
                    time.sleep(delay)
                self._chunk(f"data: {json.dumps(e)}\n\n")
            with fake._lock:
                fake.served += 1
                fake.streamed += 1
            self._chunk("data: [DONE]\n\n")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True


class ToolServer(FakeOpenAIServer):
    """The scripted server, able to answer with tool calls (and to refuse tools)."""

    def __init__(self, responder=None, refuse_tools: bool = False, **kw):
        self.current = threading.local()     # the reply being answered, per handler thread
        self.refuse_tools = refuse_tools
        super().__init__(self._wrap(responder), **kw)
        self._http.RequestHandlerClass = _ToolHandler

    def _wrap(self, responder):
        def answer(request: dict):
            if self.refuse_tools and request.get("tools"):
                reply: Any = Reply(None, 400, error={"message": "tools is not supported by this model",
                                                     "type": "invalid_request_error", "param": "tools",
                                                     "code": "unsupported_parameter"})
            else:
                reply = responder(request) if responder is not None else "submit"
            self.current.reply = reply
            return reply
        return answer


def reply_of(item: Any) -> Any:
    """A rules-file reply: a string (text), or {"content", "tool_calls": [{"name", "arguments"}]}."""
    if isinstance(item, dict):
        calls = [call(c["name"], c.get("arguments", {}), c.get("id")) for c in item.get("tool_calls", [])]
        return ToolReply(item.get("content", ""), tool_calls=calls)
    return item


def main(argv: list[str] | None = None) -> int:
    """Serve tool calls by hand (``icplay watch --actions tools --base-url``)::

        python tests/agents/fake_tool_server.py --rules rules.json --port 8766 --latency 0.5

    rules.json: ``{"<query substring>": [reply per turn, ...], "*": [...]}``, each reply a
    string or ``{"content": "...", "tool_calls": [{"name": "sql", "arguments": {"query": "..."}}]}``."""
    import argparse

    from fake_openai_server import ByTask

    p = argparse.ArgumentParser(description="a scripted OpenAI-compatible chat server that calls tools")
    p.add_argument("--rules", required=True)
    p.add_argument("--port", type=int, default=8766)
    p.add_argument("--latency", type=float, default=0.0, help="seconds before each answer")
    p.add_argument("--chunk-delay", type=float, default=0.0, help="seconds between streamed chunks")
    args = p.parse_args(argv)
    rules = json.loads(open(args.rules, encoding="utf-8").read())
    rules = {key: [reply_of(r) for r in replies] for key, replies in rules.items()}
    server = ToolServer(ByTask(rules), latency=args.latency, port=args.port, chunk_delay=args.chunk_delay)
    print(f"serving scripted tool calls at {server.url}", flush=True)
    try:
        server._http.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
