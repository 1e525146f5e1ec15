"""Chat and preference export of tools-protocol episodes: OpenAI's ``tools`` / ``tool_calls`` /
``tool`` message format, checked as a trainer would read it (every call answered by its id,
arguments that are JSON for the tool's schema), and the text format still the default."""

from __future__ import annotations

import json
import subprocess
import sys

from icplay.episode import AGENT, AGENT_EDITED, HUMAN, Trajectory, Turn
from icplay.formats.export import TrainingOptions, chat_record, preference_pairs, render

CALLS = [{"id": "srv_0", "name": "python", "arguments": '{"code": "def add(a, b): return a - b"}'},
         {"id": "srv_1", "name": "python", "arguments": '{"code": "add(1, 2)"}'}]
AGAIN = {"id": "srv_1", "name": "python", "arguments": '{"code": "add(3, 4)"}'}   # a server counting from 0 each reply


def episode(actions: str | None = "tools") -> Trajectory:
    traj = Trajectory(task={"set": "toy", "id": "1", "env": "python", "query": "Write add(a, b).", "gold": ""},
                      env="python", sandbox="bwrap", status="submitted", reward=1.0,
                      breakdown={"function": "add", "passed": 1, "total": 1},
                      policy={"kind": "llm", "model": "m", "protocol": "agent", "strategy": "tryagain",
                              **({"actions": actions} if actions else {})})
    traj.turns = [
        Turn(0, AGENT_EDITED, "def add(a, b): return a + b", "", proposed="def add(a, b): return a - b",
             comment="plus", info={"tool_call": CALLS[0], "tool_calls": CALLS, "raw": ""}),
        Turn(1, AGENT, "add(1, 2)", "3", info={"tool_call": CALLS[1]}),
        Turn(2, HUMAN, "", "", proposed="import os", comment="no imports",
             info={"rejected": True, "tool_call": {"id": "srv_2", "name": "python", "arguments": "{}"},
                   "tool_calls": []}),
        Turn(3, HUMAN, "add(2, 2)", "4"),
        Turn(4, AGENT, "add(3, 4)", "7", info={"tool_call": AGAIN, "tool_calls": [AGAIN]}),
    ]
    return traj


def check_tool_chat(record: dict) -> None:
    """What a trainer relies on: the tools offered, each call answered by id, JSON arguments."""
    tools = {t["function"]["name"]: t["function"] for t in record["tools"]}
    assert set(tools) == {"python", "submit"}
    open_calls: dict[str, dict] = {}
    ids: list[str] = []
    for m in record["messages"]:
        assert m["role"] in ("system", "user", "assistant", "tool")
        if m["role"] == "assistant":
            assert not open_calls, "a reply before every call was answered"
            assert m.get("content") or m.get("tool_calls")
            for c in m.get("tool_calls", []):
                assert c["type"] == "function"
                args = json.loads(c["function"]["arguments"])
                assert set(tools[c["function"]["name"]]["parameters"]["required"]) <= set(args)
                open_calls[c["id"]] = c
                ids.append(c["id"])
        elif m["role"] == "tool":
            assert open_calls.pop(m["tool_call_id"]) and isinstance(m["content"], str)
    assert len(ids) == len(set(ids)), f"call ids repeat: {ids}"


def test_chat_export_writes_tool_calls_and_tool_messages_for_a_tools_episode():
    record = chat_record(episode())
    check_tool_chat(record)
    msgs = record["messages"]
    # the rejected proposal stays, as context (weight 0), answered by the reviewer's comment
    assert [m["role"] for m in msgs] == ["system", "user"] + ["assistant", "tool"] * 5 + ["assistant"]
    assert [m["weight"] for m in msgs if m["role"] == "assistant"] == [1, 1, 0, 1, 1, 1]
    assert "call the `submit` tool" in msgs[0]["content"]
    edited, kept, human = msgs[2]["tool_calls"][0], msgs[4]["tool_calls"][0], msgs[8]["tool_calls"][0]
    assert json.loads(edited["function"]["arguments"]) == {"code": "def add(a, b): return a + b"}   # what ran
    assert edited["id"] == "call_0" and kept["id"] == "srv_1" and human["id"] == "call_3"
    assert json.loads(msgs[6]["tool_calls"][0]["function"]["arguments"]) == {"code": "import os"}
    assert msgs[7]["tool_call_id"] == msgs[6]["tool_calls"][0]["id"] and "no imports" in msgs[7]["content"]
    assert msgs[10]["tool_calls"][0]["id"] == "call_4"              # srv_1 again: made unique
    assert msgs[5] == {"role": "tool", "tool_call_id": "srv_1", "content": "3"}
    assert record["metadata"]["message_authors"][2::2] == ["agent-edited-by-human", "agent", "rejected", "human",
                                                          "agent", "agent"]
    assert msgs[-1]["tool_calls"][0]["function"] == {"name": "submit", "arguments": '{"function_name": "add"}'}


def test_preference_pairs_of_a_tools_episode_are_tool_calls_too():
    pairs = preference_pairs(episode())
    assert [p["kind"] for p in pairs] == ["edit", "reject"]
    edit, reject = pairs
    assert json.loads(edit["rejected"][0]["tool_calls"][0]["function"]["arguments"]) == \
        {"code": "def add(a, b): return a - b"}
    assert json.loads(edit["chosen"][0]["tool_calls"][0]["function"]["arguments"]) == \
        {"code": "def add(a, b): return a + b"}
    assert json.loads(reject["chosen"][0]["tool_calls"][0]["function"]["arguments"]) == {"code": "add(2, 2)"}
    assert [m["role"] for m in reject["prompt"]][-4:] == ["assistant", "tool", "assistant", "tool"]
    assert {t["function"]["name"] for t in reject["tools"]} == {"python", "submit"}


def test_text_stays_the_default_and_either_format_can_be_asked_for(tmp_path):
    text = chat_record(episode(actions=None))
    assert set(text) == {"messages", "metadata"} and text["messages"][2]["content"].startswith("```python\n")
    forced = chat_record(episode(actions=None), actions="tools")
    check_tool_chat(forced)
    as_text = chat_record(episode(), actions="text")
    assert set(as_text) == {"messages", "metadata"} and all(isinstance(m["content"], str) for m in as_text["messages"])
    assert as_text["messages"][-1]["content"] == "submit add"          # submit's argument, as the model writes it
    body, count = render("preference", [episode()], options=TrainingOptions(by_authorship=True))
    assert count == 2 and all("tool_calls" in json.loads(line)["chosen"][0] for line in body.splitlines())
    path = tmp_path / "ep.json"
    path.write_text(json.dumps(episode().to_dict()))
    out = tmp_path / "chat.jsonl"
    done = subprocess.run([sys.executable, "-m", "icplay.cli", "export", "chat", str(path), "--out", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    check_tool_chat(json.loads(out.read_text()))
    done = subprocess.run([sys.executable, "-m", "icplay.cli", "export", "chat", str(path), "--out", str(out),
                           "--actions", "text"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "tool_calls" not in out.read_text()
