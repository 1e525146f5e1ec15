"""Tool calls from the scripted server (``fake_openai_server``), written shortly, and a server
that refuses tools.

``calls_reply(call(name, args, id), ...)`` is a ``Reply`` with ``tool_calls`` and
``finish_reason: "tool_calls"`` (the scripted server sends them in one piece, or streamed
with each call's arguments cut over several deltas, as OpenAI does). A :class:`ToolServer`
made with ``refuse_tools=True`` answers any request with ``tools`` with the 400 that
servers without tool support send. Run by hand with a rules file (``main``).
"""

from __future__ import annotations

import json
from typing import Any

from fake_openai_server import FakeOpenAIServer, Reply


def call(name: str, arguments: Any, ident: str | None = None) -> dict[str, Any]:
    """One tool call; ``arguments`` a dict (sent as JSON) or a raw string (sent as is)."""
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": ident, "name": name, "arguments": args}


def calls_reply(*calls: dict[str, Any], content: str = "", **kw) -> Reply:
    """A reply calling ``calls`` (a call without an id gets ``call_fake_<k>``)."""
    calls = tuple({**c, "id": c["id"] or f"call_fake_{k}"} for k, c in enumerate(calls))
    return Reply(content, tool_calls=list(calls), finish_reason="tool_calls", **kw)


class ToolServer(FakeOpenAIServer):
    """The scripted server, able to answer with tool calls (and to refuse tools)."""

    def __init__(self, responder=None, refuse_tools: bool = False, **kw):
        self.refuse_tools = refuse_tools
        super().__init__(self._wrap(responder), **kw)

    def _wrap(self, responder):
        def answer(request: dict):
            if self.refuse_tools and request.get("tools"):
                reply: Any = Reply(None, 400, error={"message": "tools is not supported by this model",
                                                     "type": "invalid_request_error", "param": "tools",
                                                     "code": "unsupported_parameter"})
            else:
                reply = responder(request) if responder is not None else "submit"
            return reply
        return answer


def reply_of(item: Any) -> Any:
    """A rules-file reply: a string (text), or {"content", "tool_calls": [{"name", "arguments"}]}."""
    if isinstance(item, dict):
        calls = [call(c["name"], c.get("arguments", {}), c.get("id")) for c in item.get("tool_calls", [])]
        return calls_reply(*calls, content=item.get("content", ""))
    return item


def main(argv: list[str] | None = None) -> int:
    """Serve tool calls by hand (``icplay watch --actions tools --base-url``)::

        python tests/agents/fake_tool_server.py --rules rules.json --port 8766 --latency 0.5

    rules.json: ``{"<query substring>": [reply per turn, ...], "*": [...]}``, each reply a
    string or ``{"content": "...", "tool_calls": [{"name": "sql", "arguments": {"query": "..."}}]}``."""
    import argparse

    from fake_openai_server import ByTask, serve_until_interrupted

    p = argparse.ArgumentParser(description="a scripted OpenAI-compatible chat server that calls tools")
    p.add_argument("--rules", required=True)
    p.add_argument("--port", type=int, default=8766)
    p.add_argument("--latency", type=float, default=0.0, help="seconds before each answer")
    p.add_argument("--chunk-delay", type=float, default=0.0, help="seconds between streamed chunks")
    args = p.parse_args(argv)
    rules = json.loads(open(args.rules, encoding="utf-8").read())
    rules = {key: [reply_of(r) for r in replies] for key, replies in rules.items()}
    server = ToolServer(ByTask(rules), latency=args.latency, port=args.port, chunk_delay=args.chunk_delay)
    return serve_until_interrupted(server, "scripted tool calls")


if __name__ == "__main__":
    raise SystemExit(main())
