"""The line mode over stdin, as a script or a person at a plain terminal uses it:
``icplay watch ... --plain`` (every intervention, on SQLite with the real openai client against
the scripted server; the gold policy on bwrap and Docker) and ``icplay play --plain`` (sessions,
resume, Ctrl+C, escape sequences)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "agents"))

from fake_openai_server import FakeOpenAIServer, Reply, Script, fenced  # noqa: E402

from terminal_signals import sigint_as_from_a_terminal
from icplay.tasks.registry import load_tasks  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SQL = {t.id: t for t in load_tasks("sql")}
BASH = {t.id: t for t in load_tasks("bash")}
GOLD = SQL["bookshop-01"].gold
WRONG = "SELECT count(*) FROM books"


class Proc:
    """``icplay`` as a subprocess fed line by line; ``expect`` waits for text on stdout."""

    def __init__(self, argv: list[str], home: Path):
        env = {**os.environ, "ICPLAY_HOME": str(home), "PYTHONUNBUFFERED": "1"}
        self.p = subprocess.Popen([sys.executable, "-m", "icplay.cli", *argv], cwd=ROOT, env=env,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  preexec_fn=sigint_as_from_a_terminal)
        self.out = ""
        self.pos = 0
        self.eof = False
        self.cond = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        while True:
            ch = self.p.stdout.read(1)
            if not ch:
                with self.cond:
                    self.eof = True
                    self.cond.notify_all()
                return
            with self.cond:
                self.out += ch
                self.cond.notify_all()

    def expect(self, text: str, timeout: float = 90) -> str:
        with self.cond:
            ok = self.cond.wait_for(lambda: text in self.out[self.pos:] or self.eof, timeout)
            found = self.out.find(text, self.pos)
            assert ok and found >= 0, f"{text!r} not seen; output so far:\n{self.out}\nstderr:\n{self._err()}"
            self.pos = found + len(text)
            return self.out

    def _err(self) -> str:
        if not self.eof:
            return "(running)"
        return self.p.stderr.read()

    def send(self, line: str) -> None:
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()

    def finish(self, timeout: float = 90) -> tuple[int, str, str]:
        try:
            self.p.stdin.close()
        except BrokenPipeError:
            pass
        code = self.p.wait(timeout)
        with self.cond:
            self.cond.wait_for(lambda: self.eof, timeout)
        err = self.p.stderr.read()
        return code, self.out, err


def saved(home: Path, session: str, set_name: str, task_id: str) -> dict:
    return json.loads((home / "trajectories" / session / set_name / f"{task_id}.json").read_text())


def test_watch_plain_every_intervention_with_the_real_client_on_sqlite(tmp_path):
    replies = [fenced(WRONG), fenced(WRONG), fenced(WRONG), fenced("SELECT 1"), fenced(GOLD),
               "I am done.\n```sql\nsubmit\n```"]
    with FakeOpenAIServer(Script(replies)) as server:
        proc = Proc(["watch", "sql", "--task", "bookshop-01", "--limit", "1", "--plain", "--model", "scripted",
                     "--base-url", server.url, "--api-key", "k"], tmp_path)
        proc.expect(f"agent proposes: {WRONG}")
        proc.expect("decide> ")
        proc.send("")                                       # approve
        proc.expect(f"agent proposes: {WRONG}")
        proc.expect("decide> ")
        proc.send("e SELECT title FROM books WHERE genre = 'Poetry'")   # edit in place
        proc.expect("Falling Upward")
        proc.expect("decide> ")
        proc.send("r it must be sorted by title")            # reject with a comment
        proc.expect("(rejected: it must be sorted by title)")
        proc.expect("agent proposes: SELECT 1")
        proc.expect("decide> ")
        proc.send("t")                                      # take over (the proposal is dropped)
        proc.expect("sql> ")
        proc.send("SELECT genre FROM books")
        proc.send("LIMIT 1;")                               # SQL may span lines
        proc.expect("sql> ")
        proc.send(":agent")                                 # hand back
        proc.expect(f"agent proposes: {GOLD}")
        proc.expect("decide> ")
        proc.send("")
        proc.expect("agent proposes: submit")
        proc.expect("decide> ")
        proc.send("")                                       # confirm the agent's submit
        proc.expect("reward: 1.00  (solved)")
        code, out, err = proc.finish()
        requests = list(server.requests)
    assert code == 0, err
    traj = saved(tmp_path, "watch", "sql", "bookshop-01")
    assert [(t["author"], bool(t["info"].get("rejected"))) for t in traj["turns"]] == [
        ("agent", False), ("agent-edited-by-human", False), ("human", True), ("human", False), ("agent", False)]
    assert traj["turns"][1]["proposed"] == WRONG and traj["turns"][3]["action"] == "SELECT genre FROM books\nLIMIT 1;"
    assert traj["policy"]["kind"] == "llm" and traj["policy"]["model"] == "scripted" and traj["status"] == "submitted"
    assert len(requests) == 6                               # none while the human had the keyboard
    assert "it must be sorted by title" in requests[3]["messages"][-1]["content"]
    assert "The human at the keyboard ran:" in requests[4]["messages"][-1]["content"]
    assert "LIMIT 1;" in requests[4]["messages"][-1]["content"]
    assert all(r.get("stream") for r in requests)           # the watch streams the replies


def test_watch_plain_switches_mode_pauses_and_single_steps_while_the_agent_works(tmp_path):
    """The ``:`` lines act at any moment: mode switches at a waiting proposal and while the
    model thinks, a pause that holds the next model call back, one step, going on."""
    thinking = threading.Event()
    replies = [fenced(WRONG), Reply(fenced("SELECT 2"), hold=thinking), fenced("SELECT 3"), fenced("SELECT 4"),
               fenced("SELECT 5"), fenced(GOLD), "```sql\nsubmit\n```"]
    try:
        with FakeOpenAIServer(Script(replies)) as server:
            proc = Proc(["watch", "sql", "--task", "bookshop-01", "--limit", "1", "--plain", "--model", "scripted",
                         "--base-url", server.url, "--api-key", "k"], tmp_path)
            proc.expect("any time: :auto :confirm :human")                # said once, up front
            proc.expect(f"agent proposes: {WRONG}")
            proc.expect("decide> ")
            proc.send("?")
            proc.expect(":pause after this step")                          # the help lists them
            proc.expect("decide> ")
            proc.send(":auto")                                             # the waiting proposal runs
            proc.expect("(mode: auto)")
            assert server.wait_requests(2, timeout=60)                     # the model thinks (held)
            proc.send(":pause")
            proc.expect("(pausing before the next step")
            thinking.set()
            proc.expect("agent proposes: SELECT 2")                        # runs unasked (auto) ...
            proc.expect("paused> ")                                        # ... then the pause holds
            assert len(server.requests) == 2                               # no call while paused
            proc.send("n")                                                 # exactly one step
            proc.expect("agent proposes: SELECT 3")
            proc.expect("paused> ")
            assert len(server.requests) == 3
            proc.send(":confirm")                                          # paused -> confirm: asks again
            proc.expect("agent proposes: SELECT 4")
            proc.expect("decide> ")
            proc.send(":human")                                            # the proposal is dropped
            proc.expect("sql> ")
            proc.send("SELECT 'mine';")
            proc.expect("sql> ")
            proc.send(":confirm")                                          # hand back, in confirm mode
            proc.expect("agent proposes: SELECT 5")
            proc.expect("decide> ")
            proc.send(":auto")
            proc.expect("reward: 1.00  (solved)")                          # GOLD, then submit, unasked
            code, out, err = proc.finish()
            requests = list(server.requests)
    finally:
        thinking.set()
    assert code == 0, err
    traj = saved(tmp_path, "watch", "sql", "bookshop-01")
    assert [(t["author"], t["action"]) for t in traj["turns"]] == [
        ("agent", WRONG), ("agent", "SELECT 2"), ("agent", "SELECT 3"), ("human", "SELECT 'mine';"),
        ("agent", "SELECT 5"), ("agent", GOLD)]
    assert len(requests) == 7 and traj["status"] == "submitted"


def test_watch_plain_the_agents_submit_says_what_it_scores_and_quit_at_decide_keeps_the_turns(tmp_path):
    with FakeOpenAIServer(Script([fenced(WRONG), "submit", "submit"])) as server:
        proc = Proc(["watch", "sql", "--task", "bookshop-01", "--limit", "1", "--plain", "--model", "scripted",
                     "--base-url", server.url, "--api-key", "k"], tmp_path)
        proc.expect(f"agent proposes: {WRONG}")
        proc.expect("decide> ")
        proc.send("")                                                       # the agent's turn 1
        proc.expect("agent proposes: submit")
        proc.expect("Scored: the rows of the last query — turn 1 (the agent's):")
        proc.expect(f"  > {WRONG}")
        proc.expect("decide> ")
        proc.send("t")                                                      # take over
        proc.expect("sql> ")
        proc.send("SELECT 'mine' AS answer;")
        proc.expect("sql> ")
        proc.send(":agent")                                                 # hand back: the agent submits
        proc.expect("agent proposes: submit")
        proc.expect("Scored: the rows of the last query — turn 2 (yours):")
        proc.expect("The agent submits your turn's result")
        proc.expect("  > SELECT 'mine' AS answer;")
        proc.expect("decide> ")
        proc.send(":quit")                                                  # refused here before
        code, out, err = proc.finish()
    assert code == 0, err
    assert "? decide:" not in out and "reward:" not in out
    traj = saved(tmp_path, "watch", "sql", "bookshop-01")
    assert traj["status"] == "stopped"
    assert [(t["author"], t["action"]) for t in traj["turns"]] == [("agent", WRONG), ("human", "SELECT 'mine' AS answer;")]


def test_watch_plain_ctrl_c_while_the_model_thinks_takes_over_and_q_stops(tmp_path):
    hold = threading.Event()
    with FakeOpenAIServer(Script([Reply(fenced(WRONG), hold=hold), fenced(GOLD)])) as server:
        proc = Proc(["watch", "sql", "--task", "bookshop-01", "--model", "scripted", "--base-url", server.url,
                     "--api-key", "k", "--mode", "auto", "--plain"], tmp_path)
        assert server.wait_requests(1, timeout=60)
        proc.p.send_signal(signal.SIGINT)
        proc.expect("you have the keyboard")
        proc.expect("sql> ")
        hold.set()
        proc.send(":quit")
        proc.expect("the same command resumes it")
        code, out, err = proc.finish()
        assert code == 0, err
        assert WRONG not in out and len(server.requests) == 1
    traj = saved(tmp_path, "watch", "sql", "bookshop-01")
    assert traj["status"] == "stopped" and traj["turns"] == []

    # reopened later, in another mode: the session resumes the stopped episode
    proc = Proc(["watch", "sql", "--policy", "gold", "--mode", "auto", "--limit", "1", "--plain"], tmp_path)
    proc.expect("=== task sql/bookshop-01")
    proc.expect("reward: 1.00  (solved)")
    code, out, err = proc.finish()
    assert code == 0, err
    again = saved(tmp_path, "watch", "sql", "bookshop-01")
    assert again["id"] == traj["id"] and again["status"] == "submitted" and again["policy"]["kind"] == "gold"
    previous = again["policy"]["previous"]
    assert [p["kind"] for p in previous] == ["llm"] and previous[0]["model"] == "scripted"


def gold_bash_watch(tmp_path, sandbox):
    task = BASH["b001"]
    proc = Proc(["watch", "bash", "--policy", "gold", "--sandbox", sandbox, "--task", "b001", "--limit", "1",
                 "--plain"], tmp_path)
    proc.expect(f"agent proposes: {task.gold}")
    proc.expect("decide> ")
    proc.send("r count the lines of the file itself")
    proc.expect("(rejected: count the lines of the file itself)")
    proc.expect("decide> ")
    proc.send(f'e {task.gold} && echo ed""ited')              # an edit that still answers
    proc.expect("edited")
    proc.expect("agent proposes: submit")
    proc.expect("decide> ")
    proc.send("t")
    proc.expect("$ ")
    proc.send("printf 'a\\033[2Jb\\n'")                          # escape sequences are shown, not obeyed
    proc.expect("a^[[2Jb")
    proc.send(":agent")                                      # hand back
    proc.expect("agent proposes: submit")
    proc.expect("decide> ")
    proc.send(":auto")                                       # switch mode while the proposal waits: it runs
    proc.expect("reward: ")
    code, out, err = proc.finish()
    assert code == 0, err
    assert "\x1b" not in out
    traj = saved(tmp_path, "watch", "bash", "b001")
    assert [t["author"] for t in traj["turns"]] == ["human", "agent-edited-by-human", "human"]
    assert traj["turns"][0]["info"]["rejected"] and "\x1b[2J" in traj["turns"][2]["observation"]


@pytest.mark.bwrap
def test_watch_plain_gold_on_bwrap(tmp_path, bwrap_ready):
    gold_bash_watch(tmp_path, "bwrap")


@pytest.mark.docker
def test_watch_plain_gold_on_docker(tmp_path, bash_image):
    gold_bash_watch(tmp_path, "docker")


def ctrl_c_in_play(tmp_path, sandbox):
    proc = Proc(["play", "bash", "--plain", "--sandbox", sandbox, "--task", "b001", "--session", "s"], tmp_path)
    proc.expect("$ ")
    proc.send('echo sta""rted; sleep 60; echo nev""er')       # (quotes: the echoed line differs from the output)
    proc.expect("started")
    proc.p.send_signal(signal.SIGINT)                        # interrupts the command only
    proc.expect("[interrupted]")
    proc.expect("$ ")
    proc.send('echo af""ter')
    proc.expect("after")
    proc.expect("$ ")
    proc.p.send_signal(signal.SIGINT)                        # at the prompt: quits
    code, out, err = proc.finish()
    assert code == 0, err
    assert "never" not in out
    traj = saved(tmp_path, "s", "bash", "b001")
    assert [t["action"] for t in traj["turns"]] == ['echo sta""rted; sleep 60; echo nev""er', 'echo af""ter']
    assert traj["turns"][0]["info"].get("interrupted") and traj["status"] == "stopped"


@pytest.mark.bwrap
def test_play_plain_ctrl_c_interrupts_the_command_and_quits_at_the_prompt_bwrap(tmp_path, bwrap_ready):
    ctrl_c_in_play(tmp_path, "bwrap")


@pytest.mark.docker
def test_play_plain_ctrl_c_interrupts_the_command_and_quits_at_the_prompt_docker(tmp_path, bash_image):
    ctrl_c_in_play(tmp_path, "docker")


def test_play_plain_resumes_the_session_and_keeps_every_attempt(tmp_path):
    def play(script, *extra):
        done = subprocess.run([sys.executable, "-m", "icplay.cli", "play", "sql", "--plain", *extra], cwd=ROOT,
                              env={**os.environ, "ICPLAY_HOME": str(tmp_path)}, input=script, text=True,
                              capture_output=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout

    out = play(f"{GOLD};\nsubmit\nSELECT 41 + 1;\n:quit\n")
    assert "reward: 1.00  (solved)" in out and "=== task sql/bookshop-02" in out
    out = play("SELECT 7;\n:quit\n")                           # resumes at bookshop-02, its turn replayed
    assert "=== task sql/bookshop-02" in out and "(resumed: 1 saved turn(s) replayed)" in out
    assert "bookshop-01" not in out
    traj = saved(tmp_path, "plain", "sql", "bookshop-02")
    assert [t["action"] for t in traj["turns"]] == ["SELECT 41 + 1;", "SELECT 7;"] and traj["status"] == "stopped"
    out = play("SELECT 1;\nsubmit\n:quit\n", "--task", "bookshop-01")   # a retry: the first attempt is kept
    attempts = list((tmp_path / "attempts" / "plain" / "sql").glob("bookshop-01.*.json"))
    assert len(attempts) == 1 and json.loads(attempts[0].read_text())["reward"] == 1.0
    assert saved(tmp_path, "plain", "sql", "bookshop-01")["reward"] == 0.0


@pytest.mark.shared
def test_watch_plain_replays_an_intercode_gpt35_spider_episode_as_a_live_agent(tmp_path, shared_intercode):
    results = shared_intercode / "results" / "sql" / "gpt-3.5" / "ic_sql_multiturn_gpt-3.5_10_turns.json"
    recorded = json.loads(results.read_text())["0"]["turn_history"]["actions"]
    proc = Proc(["watch", "sql", "--tasks", "spider", "--task", "0", "--policy", f"replay:{results}",
                 "--protocol", "intercode", "--plain"], tmp_path)
    proc.expect(f"agent proposes: {recorded[0]}")
    proc.expect("decide> ")
    proc.send("")
    proc.expect("reward: 0.00")
    proc.expect(f"agent proposes: {recorded[1]}")
    proc.expect("decide> ")
    proc.send("e SELECT Name FROM people")
    proc.expect("decide> ")
    proc.send("q")
    code, out, err = proc.finish()
    assert code == 0, err
    traj = saved(tmp_path, "watch", "spider", "0")
    assert traj["policy"]["kind"] == "replay" and traj["status"] == "stopped"
    assert [(t["author"], t["action"]) for t in traj["turns"]] == [
        ("agent", recorded[0]), ("agent-edited-by-human", "SELECT Name FROM people")]
    assert traj["turns"][1]["proposed"] == recorded[1] and traj["turns"][0]["reward"] == 0.0


@pytest.mark.shared
def test_watch_plain_replay_starting_at_a_later_spider_task_gets_that_tasks_recording(tmp_path, shared_intercode):
    results = shared_intercode / "results" / "sql" / "gpt-3.5" / "ic_sql_multiturn_gpt-3.5_10_turns.json"
    recorded = json.loads(results.read_text())["3"]["turn_history"]["actions"]
    proc = Proc(["watch", "sql", "--tasks", "spider", "--task", "3", "--policy", f"replay:{results}", "--plain"],
                tmp_path)
    proc.expect("=== task spider/3 (4 of ")                     # numbered in the whole set
    proc.expect(f"agent proposes: {recorded[0]}")               # InterCode's index 3, not the slice's first
    proc.expect("decide> ")
    proc.send("q")
    code, out, err = proc.finish()
    assert code == 0, err


@pytest.mark.parametrize("argv, message", [
    (["watch", "sql", "--plain"], "say who proposes"),
    (["watch", "sql", "--policy", "replay:/no/such.json", "--plain"], "no such file"),
    (["watch", "sql", "--policy", "guess", "--plain"], "unknown --policy 'guess'"),
    (["watch", "sql", "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--strategy", "bogus", "--plain"],
     "unknown strategy 'bogus'"),
])
def test_watch_bad_input_is_one_line(tmp_path, argv, message):
    done = subprocess.run([sys.executable, "-m", "icplay.cli", *argv], cwd=ROOT, input="", text=True,
                          capture_output=True, timeout=60, env={**os.environ, "ICPLAY_HOME": str(tmp_path)})
    assert done.returncode == 1 and message in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_on_a_terminal_the_reply_streams_as_it_is_written(tmp_path):
    from icplay.agents.llm import ChatModel, LLMPolicy
    from icplay.driver import Broker, Driver, DriverSettings
    from icplay.lines import LineLoop
    from icplay.languages import make_env
    from icplay.episode import Episode

    reply = "Thought: list the poetry\n```sql\nSELECT title FROM books WHERE genre = 'Poetry'\n```"
    shown = []
    with FakeOpenAIServer(Script([reply, "```sql\nsubmit\n```"])) as server:
        env = make_env("sql", sandbox="sqlite")
        try:
            policy = LLMPolicy(ChatModel("m", base_url=server.url, api_key="k"), "react", "agent")
            driver = Driver(Episode(env, SQL["bookshop-01"]), DriverSettings(policy, broker=Broker("auto"),
                                                                             on_failure="ask"))
            outcome = LineLoop(driver, read_line=lambda prompt: "", write=lambda s: shown.append(s + "\n"),
                               write_raw=shown.append, live=True).run()
        finally:
            env.close()
    text = "".join(shown)
    assert outcome == "submitted" and "reward: " in text
    assert "agent: Thought: list the poetry\n```sql\nSELECT title" in text     # the reply, as it streamed
    assert sum(1 for piece in shown if piece and piece in reply) > 5            # in many pieces
    assert "agent thinks:" not in text and "agent proposes: SELECT title FROM books WHERE genre" in text


def test_task_means_that_task_only_in_play_plain_and_watch_plain(tmp_path):
    """``--task ID`` plays or watches that task and stops: the rest of the set is not gone on to
    (it was: the next task opened after the submit)."""
    def icplay(*argv, script=""):
        done = subprocess.run([sys.executable, "-m", "icplay.cli", *argv], cwd=ROOT, input=script, text=True,
                              env={**os.environ, "ICPLAY_HOME": str(tmp_path)}, capture_output=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout

    out = icplay("play", "sql", "--plain", "--task", "bookshop-02", script=f"{GOLD};\nsubmit\n")
    assert "=== task sql/bookshop-02" in out and "reward:" in out
    assert "=== task sql/bookshop-03" not in out
    out = icplay("watch", "sql", "--plain", "--policy", "gold", "--mode", "auto", "--task", "bookshop-02")
    assert "=== task sql/bookshop-02" in out and "reward: 1.00" in out
    assert out.count("=== task") == 1, out
