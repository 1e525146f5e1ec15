"""Fresh probes of issue 28's doors by an outside audit (inputs the other hostile suites do not
try): serve-env WebSocket messages JSON cannot hold, saved files with odd numbers and keys, ...

Each test names the door, the input, and what must hold."""

from __future__ import annotations

import asyncio
import json

import pytest


# -- serve-env: a WebSocket message the JSON reader chokes on ---------------------------------

def _serve():
    pytest.importorskip("openenv.core", reason="openenv-core is not installed (pip install 'icplay[openenv]')")
    from test_serve_env import Server
    return Server()


async def _ws_exchange(url: str, messages: list[str]) -> list[dict]:
    from websockets.asyncio.client import connect as ws_connect
    answers = []
    async with ws_connect(url) as conn:
        for message in messages:
            await conn.send(message)
            answers.append(json.loads(await asyncio.wait_for(conn.recv(), 60)))
    return answers


@pytest.mark.parametrize("message", [
    '{"type": "reset", "data": {"seed": ' + "9" * 5000 + "}}",       # over Python's 4300-digit int limit
    "[" * 200_000,                                                   # RecursionError in json.loads
], ids=["5000-digit-seed", "200k-brackets"])
def test_a_websocket_message_json_cannot_hold_is_an_error_the_session_survives(message):
    server = _serve()
    try:
        answers = asyncio.run(_ws_exchange(server.ws_url, [message, '{"type": "state"}']))
    finally:
        server.close()
    assert answers[0]["type"] == "error" and answers[0]["data"]["code"] == "INVALID_JSON"
    assert "Traceback" not in answers[0]["data"]["message"]
    assert answers[1]["type"] == "state"                               # the same session answers on


@pytest.mark.parametrize("seed", ['"abc"', "[1]", "-5", "1.5", "NaN"])
def test_a_websocket_reset_checks_its_seed_as_http_reset_does(seed):
    server = _serve()
    try:
        answer, = asyncio.run(_ws_exchange(server.ws_url, ['{"type": "reset", "data": {"seed": %s}}' % seed]))
    finally:
        server.close()
    assert answer["type"] == "error" and answer["data"]["code"] == "VALIDATION_ERROR", answer
    assert "seed" in answer["data"]["message"]


# -- saved files: numbers JSON does not have, and numbers Python will not convert ------------

def _saved_episode(path, **fields):
    from icplay.episode import Trajectory, Turn
    from icplay.store import save_trajectory
    from icplay.tasks.registry import load_tasks
    task = next(t for t in load_tasks("sql") if t.id == "bookshop-01").to_dict()
    turns = [Turn(0, "agent", "SELECT 1", "[(1,)]", reward=0.0)]
    save_trajectory(Trajectory(task=task, env="sql", sandbox="sqlite", turns=turns, status="submitted",
                               reward=1.0, best_reward=1.0, **fields), path)
    return path


def _cli(*args):
    import subprocess
    import sys
    from pathlib import Path
    return subprocess.run([sys.executable, "-m", "icplay.cli", *args], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[2], timeout=120)


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "9" * 5000], ids=["nan", "inf", "-inf", "5000-digits"])
@pytest.mark.parametrize("command", [["report", "--json"], ["scan"], ["branch", "--turn", "1"],
                                     ["export", "--out", "OUT", "csv"]], ids=lambda c: c[0])
def test_a_number_json_does_not_have_is_refused_in_one_sentence(tmp_path, number, command):
    """NaN and Infinity were read (Python's extension) and counted: ``report --json`` wrote
    ``"mean_reward": Infinity`` (not JSON) and an Infinity reward counted as solved; a
    5000-digit number raised ValueError past every reader's JSONDecodeError (a traceback)."""
    path = _saved_episode(tmp_path / "ep.json")
    path.write_text(path.read_text().replace('"reward": 1.0', f'"reward": {number}', 1))
    done = _cli(*[str(tmp_path / "out.csv") if part == "OUT" else part for part in command], str(path))
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert "Infinity" not in done.stdout and "NaN" not in done.stdout and "nan" not in done.stdout, done.stdout
    why = "a number icplay does not read" if number.isdigit() else f"reward is {float(number)}, not a finite number"
    assert f"{path}" in done.stderr and why in done.stderr, done.stderr
    if command[0] == "report":
        json.loads(done.stdout or "{}")                                   # whatever it printed is JSON


def test_an_infinite_value_in_a_saved_row_keeps_the_file_readable(tmp_path):
    """SQLite's ``SELECT 1e999`` is ``inf`` in the turn's rows, which the store writes as
    ``Infinity``: refusing that token everywhere would let a solver make its own episode
    unreadable (hidden from report and scan); only a number that counts must be finite."""
    from icplay.driver.external import CallerLoop
    from icplay.store import load_trajectory
    from icplay.tasks.registry import load_tasks
    task = next(t for t in load_tasks("sql") if t.id == "bookshop-01")
    loop = CallerLoop("sql", "sqlite", save_dir=tmp_path / "run")
    try:
        loop.reset(task)
        loop.step("SELECT 1e999, -1e999")
        loop.step("submit")
    finally:
        loop.close()
    saved, = (tmp_path / "run").rglob("bookshop-01.json")
    assert "Infinity" in saved.read_text()
    assert load_trajectory(saved).turns[0].info["rows"] == [[float("inf"), float("-inf")]]
    done = _cli("report", str(tmp_path / "run"))
    assert done.returncode == 0 and "skipped" not in done.stderr, done.stderr


# -- saved files: a folder of 100 000 files, duplicate keys -----------------------------------

def test_a_folder_of_100k_bad_files_is_a_short_note_not_a_13_mb_line(tmp_path):
    """Each skipped file was named on one stderr line (13 MB for 100 000 ``{}`` files), and the
    viewer shows the same note as a toast: ten are named, the rest counted."""
    folder = tmp_path / "run" / "sql"
    folder.mkdir(parents=True)
    _saved_episode(folder / "good.json")
    for i in range(100_000):
        (folder / f"f{i:06d}.json").write_text("{}")
    done = _cli("report", str(tmp_path / "run"))
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert len(done.stderr) < 5_000, len(done.stderr)
    assert "100000 files skipped: " in done.stderr and done.stderr.rstrip().endswith("and 99990 more"), done.stderr


def test_a_file_with_two_task_blocks_is_refused(tmp_path):
    """The one reader kept a duplicate key's last value (json.loads): a file whose two 'task'
    blocks differ read one way here and the other way in a first-wins reader."""
    from icplay.store import TrajectoryFileError, load_trajectory
    path = _saved_episode(tmp_path / "ep.json")
    text = path.read_text()
    path.write_text(text.replace('"task": {', '"task": {"set": "bash", "id": "b001", "env": "bash"}, "task": {', 1))
    with pytest.raises(TrajectoryFileError, match="task is stated twice") as refused:
        load_trajectory(path)
    assert str(refused.value).startswith(f"{path}: ") and "\n" not in str(refused.value)


# -- Docker: the solver freezes the control shell ------------------------------------------------

FREEZE_OTHERS = ('for p in $(ls /proc | grep -E "^[0-9]+$"); do [ "$p" != 1 ] && [ "$p" != $$ ] && '
                 '[ "$p" != $BASHPID ] && kill -STOP "$p" 2>/dev/null && echo "stopped $p"; done; true')
SUBMIT_BOUND = 60.0   # a hang guard, not a speed figure: a submit takes ~4 s here, the control shell's timeout is 30 s


@pytest.mark.docker
def test_a_solver_that_stops_the_control_shell_never_stalls_its_scoring(docker_client, tmp_path, monkeypatch):
    import time

    from icplay.driver.external import CallerLoop
    from icplay.tasks.registry import load_tasks
    monkeypatch.setenv("ICPLAY_HOME", str(tmp_path))
    task = next(t for t in load_tasks("bash") if t.id == "b001")
    loop = CallerLoop("bash", "docker")
    try:
        loop.reset(task)
        assert "stopped" in loop.step(FREEZE_OTHERS).observation          # the control shell, frozen
        loop.step("wc -l /testbed/logs/nginx/access.log")
        started = time.monotonic()
        outcome = loop.step("submit")
        took = time.monotonic() - started
    finally:
        loop.close()
    assert outcome.terminated and outcome.reward == 1.0
    assert took < SUBMIT_BOUND, f"submit took {took:.0f} s"


# -- serve-env: connections whose request head never ends --------------------------------------

HEAD_BOUND = 45.0     # a hang guard: a head must be whole within icplay.serve.http.HEAD_TIMEOUT (30 s)


def test_a_request_head_that_never_ends_is_closed():
    """Slowloris: uvicorn bounded no head's arrival and the Guard sees only whole heads; now a head
    must be whole within icplay.serve.http.HEAD_TIMEOUT (30 s)."""
    import socket
    import time

    server = _serve()
    try:
        conn = socket.create_connection(("127.0.0.1", server.port))
        conn.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")          # the blank line never comes
        conn.settimeout(HEAD_BOUND)
        started = time.monotonic()
        try:
            ended = conn.recv(4096)
        except socket.timeout:
            ended = None
        finally:
            conn.close()
    finally:
        server.close()
    assert ended is not None, f"still open after {time.monotonic() - started:.0f} s"


# -- MariaDB: a CALL answers with several results ------------------------------------------------

@pytest.mark.mysql
@pytest.mark.docker
def test_a_procedures_extra_results_never_shift_the_next_answers(request, tmp_path):
    """``CALL p()`` answers with the procedure's result and then the call's status: the second
    was left on the connection, so the next ``SELECT 1`` showed ``None`` and the one after
    raised ``OperationalError: MySQL Connection not available`` out of ``env.step`` (a
    traceback to every door: CallerLoop, serve-env, the TUI)."""
    from sql_helpers import sql_episode
    ep = sql_episode("mysql", request, tmp_path)
    assert ep.run("CREATE PROCEDURE p() BEGIN SELECT 1; SELECT 2, 3; END")[0].exit_code == 0
    assert ep.run("CALL p()")[0].observation == "[(1,)]"
    assert ep.run("SELECT 11")[0].observation == "[(11,)]"
    assert ep.run("SELECT 12")[0].observation == "[(12,)]"
    many = ep.run("CREATE PROCEDURE q() BEGIN DECLARE i INT DEFAULT 0; WHILE i < 100 DO SELECT i; "
                  "SET i = i + 1; END WHILE; END")[0]
    assert many.exit_code == 0, many.observation
    assert "more than 64 results" in ep.run("CALL q()")[0].observation
    assert ep.run("SELECT 13")[0].observation == "[(13,)]"
    ep.assert_saved()
