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
def nl2bash_image(docker_client, shared_intercode) -> str:
    from icplay.bash.intercode_images import build_nl2bash_images, image_name
    from icplay.sandbox.images import image_exists

    name = image_name(1)
    if not image_exists(docker_client, name):
        build_nl2bash_images(docker_client, shared_intercode, lambda line: None, versions=(1,))
    return name


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
    gold = "find / 2>&1 | wc -l; find -name '*php' | xargs cat | wc -l; find -type f | sed -e 's@^.*/@@' | grep -c '[aeiou]'"
    env.reset(_task(gold, "find-root"))
    seen = env.step(gold).observation
    result = env.submit()
    assert (result.reward, result.gold_output) == (1.0, seen)


def _renumbered(output: str, into: str) -> str:
    """``output`` with its processes' pids (/proc/N and /proc/N/task/N, in order) replaced
    by those of ``into``'s processes, when both list as many."""
    import re

    pids = re.findall(r"^/proc/([0-9]+)$", output, re.M)
    others = re.findall(r"^/proc/([0-9]+)$", into, re.M)
    if len(pids) != len(others):
        return output
    names = dict(zip(pids, others))
    return re.sub(r"^/proc/([0-9]+)(/task/([0-9]+))?(?=/|$)",
                  lambda m: f"/proc/{names[m.group(1)]}" + (f"/task/{names.get(m.group(3), m.group(3))}"
                                                            if m.group(2) else ""), output, flags=re.M)


def test_find_root_is_the_gold_s_own_first_and_after_other_actions(env):
    """`find /` walks /proc: the same processes, the same /proc/*/map_files names (no
    address randomisation), and the action's processes numbered as the gold's where the
    gold container allows (BashEnv.submit). What cannot be made equal every time: the
    shell's own pid, numbered after the threads runc starts in the container's pid
    namespace for `docker exec` (6 to 8, more on a loaded machine), and with it where the
    action's numbering can start. So the test asserts the reward (1.0) and that the two
    outputs are the same once each process's pid is replaced by its counterpart's (same
    processes, same order, same entries under each); how many were equal to the letter is
    counted in the assertion messages (docs/rewards.md)."""
    exact = []
    for attempt in range(10):
        for earlier in ([], ["ls /testbed", "cd /testbed; echo hi | cat", "sleep 0.1 & wait"]):
            env.reset(_task("find /", "find-root-all"))
            for action in earlier:
                env.step(action)
            seen = env.step("find /").observation
            result = env.submit()
            assert result.reward == 1.0, result.breakdown
            exact.append(result.gold_output == seen)
            assert _renumbered(result.gold_output, seen) == seen, (attempt, earlier, exact)


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
