"""``icplay export``: the InterCode round trip through ``rescore``, the chat format line by
line, preference pairs from a watched episode (driver + broker, real SQLite), few-shot
demonstrations through ``icplay run --demos`` (real openai client, scripted server), CSV and
the filters."""

from __future__ import annotations

import csv
import io
import json
import queue
import subprocess
import sys
import threading
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "agents"))

from fake_openai_server import ByTask, FakeOpenAIServer, fenced  # noqa: E402

from icplay.driver import ACTION, CONFIRM, PROPOSAL, Broker, Decision, Driver, DriverSettings, Limits  # noqa: E402
from icplay.driver.events import RequestOpened  # noqa: E402
from icplay.languages import make_env  # noqa: E402
from icplay.episode import Proposal  # noqa: E402
from icplay.session import Session  # noqa: E402
from icplay.tasks.registry import load_tasks  # noqa: E402

TASKS = load_tasks("sql")
TASK = next(t for t in TASKS if t.id == "bookshop-01")


def cli(*args, timeout=300, cwd=None):
    return subprocess.run([sys.executable, "-m", "icplay.cli", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd)


@pytest.fixture(scope="module")
def gold_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("gold") / "run"
    done = cli("run", "sql", "--tasks", "sql", "--policy", "gold", "--sandbox", "sqlite", "--out", str(out),
               "--quiet", "--json")
    assert done.returncode == 0, done.stderr
    return out


def test_export_intercode_then_rescore_agrees_on_every_turn(gold_run, tmp_path):
    results = tmp_path / "ic.json"
    done = cli("export", "intercode", str(gold_run), "--out", str(results))
    assert done.returncode == 0, done.stderr
    data = json.loads(results.read_text())
    assert len(data) == len(TASKS)
    by_task = {TASKS[e["task_id"]].id: e for e in data.values()}
    assert set(by_task) == {t.id for t in TASKS}
    for task in TASKS:
        saved = json.loads((gold_run / "sql" / f"{task.id}.json").read_text())
        history = by_task[task.id]["turn_history"]
        assert history["actions"] == [t["action"] for t in saved["turns"]]
        assert history["rewards"] == [t["reward"] for t in saved["turns"]]
    turns = tmp_path / "turns.jsonl"
    done = cli("rescore", str(results), "--tasks", "sql", "--sandbox", "sqlite", "--out", str(turns))
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in turns.read_text().splitlines()]
    assert len(lines) == sum(len(e["turn_history"]["actions"]) for e in data.values()) >= len(TASKS)
    assert all(r["agrees"] is True and r["executed"] for r in lines)
    assert all(r["observation_agrees"] is True for r in lines)
    n = len(lines)
    assert f"turns agreeing within 0.01: {n} / {n}" in done.stdout
    assert f"episodes whose solved status agrees: {len(TASKS)} / {len(TASKS)}" in done.stdout


def check_chat_line(line: str) -> dict:
    """One line of OpenAI's chat fine-tuning format, checked field by field."""
    record = json.loads(line)
    assert set(record) == {"messages", "metadata"}
    messages = record["messages"]
    assert isinstance(messages, list) and len(messages) >= 3
    for m in messages:
        assert set(m) == ({"role", "content", "weight"} if m["role"] == "assistant" else {"role", "content"})
        assert isinstance(m["content"], str) and m["content"]
        assert m["role"] in ("system", "user", "assistant")
        assert m.get("weight", 1) in (0, 1)
    assert len(record["metadata"]["message_authors"]) == len(messages)
    assert messages[0]["role"] == "system"
    rest = [m["role"] for m in messages[1:]]
    assert rest == ["user", "assistant"] * (len(rest) // 2), rest     # alternating, ends with the assistant
    return record


def test_export_chat_is_the_fine_tuning_format_line_by_line(gold_run, tmp_path):
    out = tmp_path / "chat.jsonl"
    done = cli("export", "chat", str(gold_run), "--out", str(out), "--strategy", "react")
    assert done.returncode == 0, done.stderr
    lines = out.read_text().splitlines()
    assert len(lines) == len(TASKS)
    queries = set()
    for line in lines:
        messages = check_chat_line(line)["messages"]
        assert "Thought:" in messages[0]["content"]            # the react strategy's system prompt
        queries.add(messages[1]["content"].splitlines()[0].removeprefix("Task: "))
        assert messages[2]["content"].startswith("Thought:") and "```sql\n" in messages[2]["content"]
    assert queries == {t.query for t in TASKS}


class ScriptedPolicy:
    """Proposes the given actions in order (None: submit)."""

    def __init__(self, actions):
        self.actions = list(actions)
        self.calls = 0

    def describe(self):
        return {"kind": "scripted"}

    def propose(self, task, trajectory, cancel=None, notify=None):
        action = self.actions[self.calls] if self.calls < len(self.actions) else None
        self.calls += 1
        return Proposal(action, thought=f"step {self.calls}")


def test_export_preference_of_a_watched_episode_gives_one_pair_per_edit_and_rejection(tmp_path):
    wrong, look, gold = "SELECT count(*) FROM books", "SELECT genre FROM books", TASK.gold
    env = make_env("sql", sandbox="sqlite")
    try:
        session = Session("watch", home=tmp_path / "home")
        policy = ScriptedPolicy([wrong, "DELETE FROM books", gold])
        episode, _ = session.open_episode(env, TASK, policy=policy.describe())
        driver = Driver(episode, DriverSettings(policy, "agent", Limits(max_turns=10), broker=Broker(CONFIRM)))
        requests: queue.Queue = queue.Queue()
        driver.listeners.append(lambda e: requests.put(e.request) if isinstance(e, RequestOpened) else None)
        thread = threading.Thread(target=driver.run, daemon=True)
        thread.start()

        def answer(kind, decision):
            req = requests.get(timeout=20)
            assert req.kind == kind, (req.kind, req.proposal)
            assert driver.broker.answer(req.id, decision)

        answer(PROPOSAL, Decision.edit(look, "look at the genres first"))      # pair 1: edit
        answer(PROPOSAL, Decision.reject("never delete"))                     # pair 2: rejection ...
        answer(PROPOSAL, Decision.take_over())
        answer(ACTION, Decision.run(gold))                                    # ... and the human's next action
        answer(ACTION, Decision.submit())
        thread.join(timeout=30)
        assert not thread.is_alive()
    finally:
        env.close()
    traj = driver.trajectory
    assert [t.kind for t in traj.turns] == ["edited", "rejected", "human"] and traj.reward == 1.0
    folder = tmp_path / "home" / "trajectories" / "watch"
    out = tmp_path / "pairs.jsonl"
    done = cli("export", "preference", str(folder), "--out", str(out))
    assert done.returncode == 0 and out.read_text() == ""      # nothing scored the alternatives: no pair
    done = cli("export", "preference", str(folder), "--out", str(out), "--by-authorship")
    assert done.returncode == 0, done.stderr
    pairs = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(pairs) == 2 and all(p["pairing"] == "authorship" for p in pairs)
    edit, reject = pairs
    assert edit["kind"] == "edit" and wrong in edit["rejected"][0]["content"] and look in edit["chosen"][0]["content"]
    assert [m["role"] for m in edit["prompt"]] == ["system", "user"]
    assert reject["kind"] == "reject" and reject["comment"] == "never delete"
    assert "DELETE FROM books" in reject["rejected"][0]["content"] and gold in reject["chosen"][0]["content"]
    # the context of the rejection holds the edited turn as it ran, and its output
    assert [m["role"] for m in reject["prompt"]] == ["system", "user", "assistant", "user"]
    assert look in reject["prompt"][2]["content"] and "Poetry" in reject["prompt"][3]["content"]
    # as chat data the same episode is what ran (the edit, the human's query), then submit
    chat = tmp_path / "chat.jsonl"
    done = cli("export", "chat", str(folder), "--out", str(chat))
    assert done.returncode == 0, done.stderr
    messages = check_chat_line(chat.read_text().splitlines()[0])["messages"]
    replies = [(m["content"], m["weight"]) for m in messages if m["role"] == "assistant"]
    assert replies == [(fenced(look), 1), (fenced("DELETE FROM books"), 0), (fenced(gold), 1), ("submit", 1)]
    # the --author filter: this episode is mixed, neither human nor agent alone
    done = cli("export", "preference", str(folder), "--out", str(out), "--author", "agent", "--by-authorship")
    assert done.returncode == 1 and "Traceback" not in done.stderr and "filters" in done.stderr


def test_run_demos_puts_exported_demonstrations_in_the_prompt(gold_run, tmp_path):
    demos = tmp_path / "demos.json"
    done = cli("export", "fewshot", str(gold_run / "sql" / "bookshop-02.json"), str(gold_run / "sql" / "bookshop-03.json"),
               "--out", str(demos), "--solved-only")
    assert done.returncode == 0, done.stderr
    data = json.loads(demos.read_text())
    assert len(data["demos"]) == 2
    two = next(t for t in TASKS if t.id == "bookshop-02")
    rules = {TASK.query: [fenced(TASK.gold)]}
    with FakeOpenAIServer(ByTask(rules)) as server:
        done = cli("run", "sql", "--tasks", "sql", "--task-id", TASK.id, "--model", "scripted", "--base-url",
                   server.url, "--api-key", "k", "--sandbox", "sqlite", "--out", str(tmp_path / "run"),
                   "--demos", str(demos), "--quiet", "--json")
        assert done.returncode == 0, done.stderr
        system = server.requests[0]["messages"][0]["content"]
    assert "Example 1:" in system and "Example 2:" in system
    assert f"Task: {two.query}" in system and fenced(two.gold) in system
    saved = json.loads((tmp_path / "run" / "sql" / f"{TASK.id}.json").read_text())
    assert saved["policy"]["demos"] == {"file": str(demos), "count": 2} and saved["reward"] == 1.0
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    done = cli("run", "sql", "--tasks", "sql", "--model", "m", "--base-url", "http://127.0.0.1:9/v1",
               "--api-key", "k", "--demos", str(bad), "--out", str(tmp_path / "run2"))
    assert done.returncode == 1 and "Traceback" not in done.stderr and "demonstrations file" in done.stderr


def test_export_csv_has_one_row_per_episode_and_the_filters_apply(gold_run, tmp_path):
    out = tmp_path / "eps.csv"
    done = cli("export", "csv", str(gold_run), "--out", str(out), "--author", "agent", "--min-reward", "1")
    assert done.returncode == 0, done.stderr
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    assert len(rows) == len(TASKS) and {r["task"] for r in rows} == {t.id for t in TASKS}
    assert all(r["solved"] == "1" and r["author"] == "agent" and r["policy"] == "gold" for r in rows)
    done = cli("export", "csv", str(gold_run), "--out", str(out), "--author", "human")
    assert done.returncode == 1 and "none of the 44 episodes passes the filters" in done.stderr


def test_bad_export_input_is_one_sentence(gold_run, tmp_path):
    for args, words in ((["chat", str(tmp_path / "nothing"), "--out", str(tmp_path / "x")], "no such file"),
                        (["chat", str(gold_run), "--out", "/proc/no/such/dir/x"], "cannot write"),
                        (["chat", str(gold_run), "--out", str(tmp_path / "x"), "--strategy", "bogus"],
                         "unknown strategy")):
        done = cli("export", *args)
        assert done.returncode == 1 and "Traceback" not in done.stderr and words in done.stderr, done.stderr
