"""``icplay watch --plain --actions tools``: every intervention on proposed tool calls (approve,
edit the call's code, reject with a comment that reaches the model as the tool result, take
over), on SQLite with the real openai client against the scripted server's tool calls."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "agents"))

from fake_openai_server import Script  # noqa: E402
from fake_tool_server import ToolServer, call, calls_reply  # noqa: E402
from test_watch_plain import GOLD, WRONG, Proc, saved  # noqa: E402


def sql(query, ident):
    return call("sql", {"query": query}, ident)


def test_watch_plain_every_intervention_on_tool_calls(tmp_path):
    replies = [calls_reply(sql(WRONG, "a1"), sql(WRONG, "a2"), content="Count, then count again."),
               calls_reply(sql("DROP TABLE books", "b1"), sql(WRONG, "b2")),
               calls_reply(sql("SELECT 1", "c1")),
               calls_reply(sql(GOLD, "d1"), call("submit", {}, "d2"))]
    with ToolServer(Script(replies)) as server:
        proc = Proc(["watch", "sql", "--task", "bookshop-01", "--limit", "1", "--plain", "--model", "scripted",
                     "--base-url", server.url, "--api-key", "k", "--actions", "tools"], tmp_path)
        proc.expect(f"agent calls sql: {WRONG}")
        proc.expect("decide> ")
        proc.send("")                                              # approve the first call
        proc.expect(f"agent calls sql: {WRONG}")                   # the second call of the same reply
        proc.expect("decide> ")
        proc.send("e SELECT title FROM books WHERE genre = 'Poetry'")   # edit its code
        proc.expect("Falling Upward")
        proc.expect("agent calls sql: DROP TABLE books")
        proc.expect("decide> ")
        proc.send("r never drop tables")                           # reject: the rest of the reply is not run
        proc.expect("(rejected: never drop tables)")
        proc.expect("agent calls sql: SELECT 1")
        proc.expect("decide> ")
        proc.send("t")                                             # take over
        proc.expect("sql> ")
        proc.send("SELECT genre FROM books LIMIT 1;")
        proc.expect("sql> ")
        proc.send(":agent")
        proc.expect(f"agent calls sql: {GOLD}")
        proc.expect("decide> ")
        proc.send("")
        proc.expect("agent calls submit")
        proc.expect("decide> ")
        proc.send("")
        proc.expect("reward: 1.00  (solved)")
        code, out, err = proc.finish()
        requests = list(server.requests)
    assert code == 0, err
    traj = saved(tmp_path, "watch", "sql", "bookshop-01")
    assert [(t["author"], bool(t["info"].get("rejected"))) for t in traj["turns"]] == [
        ("agent", False), ("agent-edited-by-human", False), ("human", True), ("human", False), ("agent", False)]
    assert [t["info"].get("tool_call", {}).get("id") for t in traj["turns"]] == ["a1", "a2", "b1", None, "d1"]
    assert traj["policy"]["actions"] == "tools" and traj["status"] == "submitted"
    assert len(requests) == 4 and all(r["tools"] for r in requests)
    third = requests[2]["messages"]
    assert third[-2:] == [
        {"role": "tool", "tool_call_id": "b1",
         "content": "A human reviewer rejected this call without running it. Their comment: never drop tables"},
        {"role": "tool", "tool_call_id": "b2",
         "content": "[icplay] Not run: an earlier call of the same reply was not run, so the rest were skipped."}]
    assert "A human reviewer replaced your query with" in third[-4]["content"]
    last = requests[3]["messages"]                                 # the taken-over proposal was dropped
    assert [m["role"] for m in last[-3:]] == ["tool", "tool", "user"] and last[-2]["tool_call_id"] == "b2"
    assert last[-1]["content"].startswith("The human at the keyboard ran:\n```sql\nSELECT genre FROM books")
