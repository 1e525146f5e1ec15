"""Nothing of icplay is visible to an action on a task's own image (InterCode's NL2Bash
images), gold and agent containers look alike, and a gold that prints the time scores 1.0.

Needs ../shared/intercode (InterCode's Dockerfile and set-up scripts); the images are built
from it when missing (``icplay images build nl2bash``: a few minutes the first time, the
apt layer is shared by the four).
"""

from __future__ import annotations

import pytest

from icplay.languages import make_env
from icplay.tasks.model import Task

pytestmark = [pytest.mark.docker, pytest.mark.shared]


@pytest.fixture(scope="module")
def env(nl2bash_image):
    environment = make_env("bash", sandbox="docker", image=nl2bash_image)
    yield environment
    environment.close()


def _task(gold: str, name: str = "t") -> Task:
    return Task(id=name, env="bash", set="fidelity", query="q", gold=gold)


def test_nothing_of_icplay_is_visible_to_an_action(env):
    env.reset(_task("true"))
    environ = env.step("env").observation
    names = {line.split("=", 1)[0] for line in environ.splitlines() if "=" in line}
    assert not names & {"PAGER", "GIT_PAGER", "LC_ALL", "TERM"}, environ
    assert "icplay" not in environ.lower()
    found = env.step("find / -xdev -name '*icplay*' 2>&1; ls -a /run").observation
    assert "icplay" not in found, found
    pid1 = env.step("tr '\\0' ' ' < /proc/1/cmdline").observation
    assert pid1.strip() == "/bin/bash"
    # no process the action may not read: `find /` over /proc meets no permission error
    walked = env.step("find /proc -maxdepth 3 2>&1 >/dev/null | grep -c 'Permission denied'").observation
    assert walked.strip() == "0"
    assert env.step("locale 2>&1 | grep LC_CTYPE").observation.strip() == 'LC_CTYPE="POSIX"'
    # errors read as bash's own, numbered from the action's first line
    assert env.step("nosuch").observation == "bash: line 1: nosuch: command not found\n"
    assert env.step("true\nnosuch").observation == "bash: line 2: nosuch: command not found\n"
    assert "OLDPWD" not in env.step("set").observation
    # no function or variable of icplay's shell (the call stack names the one running)
    assert env.step("declare -F").observation == ""
    assert env.step("set | grep -i -e icplay -e __ic | grep -v ^FUNCNAME=").observation == ""


def test_find_root_counts_score_one(env):
    """Counts over the whole root, /proc included. Each ``find`` runs alone, its output to a
    file: in a pipeline bash forks the readers after it, and on a loaded machine ``find``
    may walk /proc before they exist (a race of bash's, in any container: it made this
    test fail once in sixteen runs)."""
    gold = ("cd /; find / > /tmp/all 2>&1; wc -l < /tmp/all; find -name '*php' -exec cat {} + > /tmp/php; "
            "wc -l < /tmp/php; find -type f > /tmp/files; sed -e 's@^.*/@@' /tmp/files | grep -c '[aeiou]'")
    env.reset(_task(gold, "find-root"))
    seen = env.step(gold).observation
    result = env.submit()
    assert (result.reward, result.gold_output) == (1.0, seen)


def test_find_root_is_the_gold_s_own_first_and_after_other_actions(env):
    """`find /` walks /proc: the same processes under the same numbers (the shell and the
    first action get the same pids in every container, a later action's gold run is
    numbered as the agent's), the same /proc/*/map_files names (no address randomisation)."""
    for attempt in range(3):
        for earlier in ([], ["ls /testbed", "cd /testbed; echo hi | cat", "sleep 0.1 & wait"]):
            env.reset(_task("find /", "find-root-all"))
            for action in earlier:
                env.step(action)
            seen = env.step("find /").observation
            result = env.submit()
            assert result.reward == 1.0, result.breakdown
            assert result.gold_output == seen, (attempt, earlier)


def test_the_shell_has_the_pid_and_environment_of_every_container(env, nl2bash_image, docker_client):
    """The same shell pid and the same first action's pids in every container; the shell is
    a docker exec (its parent is outside the container) with the environment one gets."""
    from icplay.sandbox.faithful import ACTIONS_FROM, FIRST_SHELL_PID

    firsts = []
    for attempt in range(3):
        env.reset(_task("true", f"pids-{attempt}"))
        firsts.append(env.step("sh -c 'echo $$'; echo $$ $PPID").observation)
    assert firsts == [firsts[0]] * 3
    assert int(firsts[0].split()[0]) > ACTIONS_FROM and firsts[0].split()[1:] == [str(FIRST_SHELL_PID), "0"]
    listing = "tr '\\0' '\\n' < /proc/$$/environ | sort"
    own = env.step(listing).observation
    code, execd = env.sandbox.container.exec_run(["bash", "-c", listing])
    assert (code, own) == (0, execd.decode())
    assert env.step("env | sort").observation == env.sandbox.container.exec_run(["bash", "-c", "env | sort"]).output.decode()


def test_a_date_gold_scores_one_ten_times_in_a_row(env):
    rewards = []
    for attempt in range(10):
        env.reset(_task("date", f"date-{attempt}"))
        env.step("date")
        result = env.submit()
        rewards.append(result.reward)
        assert result.breakdown.get("gold_nondeterministic") is True, result.breakdown
    assert rewards == [1.0] * 10


def test_a_runaway_command_is_stopped_and_the_shell_stays(nl2bash_image):
    environment = make_env("bash", sandbox="docker", image=nl2bash_image, timeout=1)
    try:
        environment.reset(_task("true"))
        environment.step("cd /testbed; X=kept")
        stopped = environment.step("sleep 30 & sleep 30")
        assert stopped.info["timed_out"] and not stopped.info["shell_died"]
        after = environment.step("echo $PWD $X; cat /proc/[0-9]*/stat 2>/dev/null | "
                                 "awk '$2 == \"(sleep)\" && $3 != \"Z\"' | wc -l")
        # (bash may first report the killed background job: "bash: line 1: 13 Killed ...")
        assert after.observation.split()[-3:] == ["/testbed", "kept", "0"]   # both sleeps are gone
    finally:
        environment.close()


def test_a_fork_bomb_and_a_shell_deaf_to_the_stop_signal_are_stopped(nl2bash_image):
    import time

    environment = make_env("bash", sandbox="docker", image=nl2bash_image, timeout=3)
    try:
        environment.reset(_task("true"))
        environment.step(":(){ :|:& };:")
        # held at the pids limit in the background; the shell answers (echo is a builtin),
        # and the next timeout stops every stray process
        assert "alive" in environment.step("echo alive").observation.splitlines()
        assert environment.step("trap '' USR1; while :; do :; done").info["timed_out"]
        deadline = time.monotonic() + 20
        while True:   # the killed bomb's zombies are reaped by pid 1 (a plain bash) within moments
            environment.step("echo again; ls /proc | grep -c '^[0-9]'")
            after = environment.last_output.split()
            if after[-2:-1] == ["again"] and after[-1].isdigit() and int(after[-1]) <= 4:
                break
            assert time.monotonic() < deadline, after
            time.sleep(0.5)
    finally:
        environment.close()


def test_a_shell_that_exits_or_a_container_that_dies_is_replaced(nl2bash_image, docker_client):
    """The warden starts a new shell after ``exit``; a container whose pid 1 was killed
    from outside is replaced by a new one, whose first shell again has the first pid."""
    from icplay.sandbox.faithful import FIRST_SHELL_PID

    environment = make_env("bash", sandbox="docker", image=nl2bash_image)
    try:
        environment.reset(_task("true"))
        first = environment.step("cd /testbed; echo bye; exit 3")
        assert first.observation == "bye\n" and first.info["shell_died"], first
        again = environment.step("echo $$ $PWD")
        assert again.observation.split()[1] == "/" and int(again.observation.split()[0]) > FIRST_SHELL_PID
        assert again.info["shell_restarted"]
        docker_client.api.kill(environment.sandbox.container.id, signal="SIGKILL")
        after = environment.step("echo $$")
        assert after.observation == f"{FIRST_SHELL_PID}\n" and after.info["sandbox_replaced"], after
    finally:
        environment.close()
