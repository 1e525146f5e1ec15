"""The Python environment: a persistent interpreter inside a real sandbox (bwrap over the
host's python3, and the icplay-python Docker image), InterCode-Python's semantics and reward."""

from __future__ import annotations

import json

import pytest

from icplay.languages import make_env
from icplay.tasks.model import Task

SANDBOXES = [pytest.param("bwrap", marks=pytest.mark.bwrap), pytest.param("docker", marks=pytest.mark.docker)]

ADD = Task(id="add", set="test", env="python", query="Write add(a, b).",
           gold="def helper(x):\r\n    return x\r\ndef add(a, b):\r\n    return helper(a) + b",
           extra={"tests": ["assert add(1, 2) == 3", "assert add(-1, 1) == 0", "assert add(2, 2) == 4", "print(add(5, 5))"],
                  "test_setup_code": ""})


@pytest.fixture(params=SANDBOXES)
def env(request):
    kind = request.param
    request.getfixturevalue("bwrap_ready" if kind == "bwrap" else "python_image")
    env = make_env("python", kind, timeout=5)
    env.reset(ADD)
    yield env
    env.close()


def test_a_bare_expression_shows_its_value_and_a_statement_shows_nothing(env):
    assert env.step("1 + 1").observation == "2\n"
    assert env.step("x = 40").observation == ""
    assert env.step("'a' * 3").observation == "'aaa'\n"
    assert env.step("None").observation == ""


def test_a_multi_line_def_is_one_action_and_state_persists(env):
    step = env.step("def double(n):\n    result = n * 2\n\n    return result")
    assert step.observation == "" and step.exit_code == 0
    env.step("import collections\nseen = collections.Counter('abca')")
    assert env.step("double(21)").observation == "42\n"
    assert env.step("seen['a']").observation == "2\n"


def test_output_then_the_traceback_last_line(env):
    step = env.step("print('before')\n1 / 0")
    assert step.observation == "before\nZeroDivisionError: division by zero\n" and step.exit_code == 1
    assert env.step("undefined_name").observation == "NameError: name 'undefined_name' is not defined\n"
    assert env.step("def broken(:").observation.startswith("SyntaxError: ")
    assert env.step("'still alive'").observation == "'still alive'\n"


def test_input_gets_end_of_file_and_sys_exit_keeps_the_interpreter(env):
    env.step("kept = 7")
    assert env.step("input('name? ')").observation.endswith("EOFError: EOF when reading a line\n")
    assert env.step("import sys; sys.exit(3)").observation == "SystemExit: 3\n"
    step = env.step("kept")
    assert step.observation == "7\n" and not step.info["notes"]


def test_a_timeout_stops_the_action_and_the_next_one_says_the_state_is_gone(env):
    env.step("kept = 1")
    step = env.step("import time\nprint('start', flush=True)\nwhile True: time.sleep(0.1)")
    assert step.info["timed_out"] and step.observation.startswith("start\n")
    after = env.step("'kept' in globals()")
    assert after.observation == "False\n"
    assert any("new Python interpreter" in n for n in after.info["notes"])


def test_endless_output_is_cut(env):
    step = env.step("while True: print('y' * 1000)")
    assert step.info["truncated_bytes"] > 0 and step.info["interpreter"] == "stopped"
    assert len(step.observation.encode()) <= 1024 * 1024 + 4096
    assert env.step("6 * 7").observation == "42\n"


def test_os_exit_and_a_killed_interpreter_start_a_new_one(env):
    env.step("kept = 1")
    died = env.step("import os\nprint('bye', flush=True)\nos._exit(0)")
    assert died.observation == "bye\n" and died.info["interpreter"] == "died"
    assert any("exited" in n for n in died.info["notes"])
    assert env.step("'kept' in globals()").observation == "False\n"
    env.step("kept = 2")
    killed = env.step("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)")
    assert killed.info["interpreter"] == "died"
    assert env.step("1").observation == "1\n"


def test_a_fork_does_not_leave_two_interpreters(env):
    step = env.step("import os\npid = os.fork()\nif pid == 0:\n    print('child', flush=True)\nelse:\n"
                    "    os.waitpid(pid, 0)\n    print('parent', flush=True)")
    assert step.observation.split() == ["child", "parent"]
    env.step("counter = 0")
    for _ in range(3):
        env.step("counter += 1")
    assert env.step("counter").observation == "3\n"


def test_interrupt_stops_a_running_action(env):
    import threading

    timer = threading.Timer(1.0, env.interrupt)
    timer.start()
    step = env.step("import time\ntime.sleep(30)")
    timer.join()
    assert step.info["interrupted"] and step.duration < 5


def test_submit_scores_the_named_function_against_the_gold(env):
    env.step("def my_add(a, b):\n    return a + b")
    right = env.submit("my_add")
    assert right.reward == 1.0 and right.breakdown["passed"] == 4 and right.breakdown["gold_function"] == "add"


def test_submit_counts_only_the_matching_outcomes(env):
    # wrong for negative numbers only; prints like the gold for the last test
    env.step("def almost(a, b):\n    return abs(a) + b")
    result = env.submit("almost")
    assert result.reward == 0.75
    assert [t["match"] for t in result.breakdown["tests"]] == [True, False, True, True]


def test_a_hanging_function_is_cut_and_the_other_tests_still_run(env):
    env.step("def slow(a, b):\n    if a < 0:\n        while True: pass\n    return a + b")
    result = env.submit("slow")
    assert [t["yours"]["status"] for t in result.breakdown["tests"]] == ["ok", "cut", "ok", "ok"]
    assert result.reward == 0.75


def test_submit_of_a_missing_function_scores_zero(env):
    result = env.submit("nothing_here")
    assert result.reward == 0.0
    assert "NameError" in result.breakdown["tests"][0]["yours"]["output"]


def unsolved(folder) -> str:
    """What went wrong in the episodes not solved (for the assertion message)."""
    from icplay.store import load_trajectory

    lines = []
    for path in sorted(folder.glob("python/*.json")):
        traj = load_trajectory(path)
        if not traj.solved:
            lines.append(f"{path.stem}: {traj.status} {traj.error or ''} {json.dumps(traj.breakdown)[:1500]}")
            lines += [f"  {t.action[:80]!r} -> {t.observation[:300]!r} {t.info.get('notes')}" for t in traj.turns]
    return "\n".join(lines)


@pytest.mark.bwrap
def test_the_gold_policy_solves_the_bundled_set_on_bwrap(bwrap_ready, tmp_path, capsys):
    from icplay.cli import main
    from icplay.tasks.registry import load_tasks

    code = main(["run", "python", "--tasks", "python", "--policy", "gold", "--sandbox", "bwrap", "-j", "2",
                 "--out", str(tmp_path), "--json", "--quiet"])
    out = capsys.readouterr()
    data = json.loads(out.out)
    assert code == 0, out.err
    assert data["episodes"] == len(load_tasks("python")) >= 40 and data["rate"] == 1.0, unsolved(tmp_path)
    assert data["strict_solved"] == data["strict_judged"] == data["episodes"], unsolved(tmp_path)


@pytest.mark.docker
@pytest.mark.slow
def test_the_gold_policy_solves_the_bundled_set_on_docker(python_image, tmp_path, capsys):
    from icplay.cli import main
    from icplay.tasks.registry import load_tasks

    code = main(["run", "python", "--tasks", "python", "--policy", "gold", "--sandbox", "docker", "-j", "2",
                 "--out", str(tmp_path), "--json", "--quiet"])
    out = capsys.readouterr()
    data = json.loads(out.out)
    assert code == 0, out.err
    assert data["episodes"] == len(load_tasks("python")) and data["rate"] == 1.0, unsolved(tmp_path)
    assert data["strict_solved"] == data["strict_judged"] == data["episodes"], unsolved(tmp_path)


def test_a_function_that_forks_is_scored_once_per_call(env):
    # the child of a fork ends with the call (its result is not reported), as an action's
    # child ends with the action; what it printed is the call's output
    env.step("import os\ndef add(a, b):\n    pid = os.fork()\n    if pid == 0:\n        print('child', a)\n"
             "        return 0\n    os.waitpid(pid, 0)\n    return a + b")
    result = env.submit()
    assert [t["calls"]["yours"] for t in result.breakdown["tests"]] == [["3"], ["0"], ["4"], ["10"]]
    assert result.breakdown["tests"][3]["yours"]["output"] == "child 5\n10\n"
    env.step("def quiet(a, b):\n    if os.fork() == 0:\n        return 0\n    os.wait()\n    return a + b")
    assert env.submit("quiet").reward == 1.0
