"""The solver stops or kills what scores it (issue 28's audit, item (a), and its variants).

On Docker and Podman the solver is root in its container, as is the control shell that
runs the reward's side commands: it may ``kill -STOP`` that shell (no capability needed).
The submit then waited out the side command's timeout (152 s, not 4) and fell back to a
``docker exec`` with the solver's processes running, free to race what the scoring reads.
Now the warden (pid 1, which nothing in its pid namespace can stop) holds every other
process and continues the control shell around each side command, the sweep and the
recycle. bwrap runs its side commands on the host, out of the sandbox's pid namespace,
having stopped the sandbox's processes from there: the same probes hold there too.

Each probe leaves a *ticker* running (a process that appends a line to /testbed/ticks every
20 ms) and asks: does a side command return promptly and right, does the ticker stand still
while it runs, and does it run on after?"""

from __future__ import annotations

import time

import pytest
from conftest import wait_until

TICKER = "(exec -a icplay-ticker bash -c 'while :; do echo t >> /testbed/ticks; sleep 0.02; done') & sleep 0.3; echo started"
# for each process started from outside the container (its parent is not in it: the control
# shell, on Docker and Podman) but pid 1 and the session's shell
OTHER_SHELLS = ('for d in /proc/[0-9]*; do p=${d#/proc/}; case $p in 1|$$|$BASHPID|$PPID) continue;; esac; '
                'read -r line 2>/dev/null < $d/stat || continue; f=(${line##*) }); [ "${f[1]}" = 0 ] || continue; ')
STOP_OTHERS = OTHER_SHELLS + 'kill -STOP $p 2>/dev/null && echo "stopped $p"; done; true'
KILL_OTHERS = OTHER_SHELLS + 'kill -KILL $p 2>/dev/null && echo "killed $p"; done; true'
# a daemon that stops them again every 50 ms, for a minute
STOPPER = ("(exec -a icplay-stopper bash -c '" + "end=$((SECONDS+60)); while [ $SECONDS -lt $end ]; do "
           + OTHER_SHELLS.replace("'", "'\\''") + "kill -STOP $p 2>/dev/null; done; sleep 0.05; done"
           + "') & sleep 0.5; echo looping")
MEASURE = ["/bin/bash", "-c", "a=$(wc -l < testbed/ticks); sleep 1; b=$(wc -l < testbed/ticks); echo ticks $a $b"]
PROMPT = 15.0   # a hang guard for one side command (its timeout here is 30 s; the stall waited it out)


def ticks(played) -> int:
    seen = played.act("wc -l < /testbed/ticks").observation
    assert seen.strip().isdigit(), seen
    return int(seen)


def side_command_holds_the_solver(played) -> None:
    """A side command returns promptly, saw the ticker stand still, and the ticker runs on after."""
    started = time.monotonic()
    code, output = played.sandbox.exec(MEASURE, timeout=30)
    took = time.monotonic() - started
    assert code == 0 and output.startswith("ticks "), (code, output, f"{took:.1f} s")
    before, after = output.split()[1:3]
    assert before == after, f"the solver's ticker ran during the side command: {output}"
    assert took < PROMPT, f"the side command took {took:.0f} s"
    seen = ticks(played)
    assert wait_until(lambda: ticks(played) > seen, 10), "the ticker was not let go after the side command"


def test_a_side_command_holds_the_solvers_processes(play):
    played = play()
    assert "started" in played.act(TICKER).observation
    side_command_holds_the_solver(played)
    played.assert_usable()


def test_a_stopped_control_shell_neither_stalls_nor_frees_the_solver(play):
    played = play()
    assert "started" in played.act(TICKER).observation
    played.act(STOP_OTHERS)
    side_command_holds_the_solver(played)
    side_command_holds_the_solver(played)                 # and again: the control shell is still used
    played.assert_usable()
    played.assert_all_saved()


def test_a_daemon_that_keeps_stopping_the_control_shell_never_stalls_it(play):
    played = play()
    assert "started" in played.act(TICKER).observation
    assert "looping" in played.act(STOPPER).observation
    for _ in range(3):
        side_command_holds_the_solver(played)


def test_a_killed_control_shell_falls_back_with_the_solver_still_held(play):
    played = play()
    assert "started" in played.act(TICKER).observation
    played.act(KILL_OTHERS)
    side_command_holds_the_solver(played)
    played.assert_usable()


@pytest.mark.docker
def test_a_recycle_after_the_control_shell_was_stopped_is_prompt(docker_client, bash_image):
    """The recycle's proof runs in the control shell: a stopped one made it wait out its 30 s."""
    from icplay.sandbox.docker import DockerSandbox
    sandbox = DockerSandbox(docker_client, bash_image, timeout=10)
    sandbox.start()
    try:
        assert sandbox.run(STOP_OTHERS).exit_code == 0
        started = time.monotonic()
        recycled = sandbox.recycle()
        took = time.monotonic() - started
        assert recycled, sandbox.last_recycle_note
        assert took < PROMPT, f"the recycle took {took:.0f} s"
        assert sandbox.run("echo fresh").output.strip() == "fresh"
    finally:
        sandbox.close()


@pytest.mark.docker
def test_the_control_shells_stdin_output_and_memory_are_out_of_reach(play_docker):
    """Where icplay sends the control shell its side commands (its stdin) and reads their
    output: a solver that could write there would run commands with the control shell's
    capabilities and forge what scoring reads. Its shell has one capability fewer: EPERM."""
    played = play_docker()
    tried = played.act(OTHER_SHELLS + 'echo "control $p"; for fd in 0 1 2; do (echo "touch /tmp/forged-$fd" > /proc/$p/fd/$fd) '
                       '2>&1 && echo wrote-$fd; done; cat /proc/$p/environ /proc/$p/maps 2>&1 | head -2; done').observation
    assert "control " in tried and "wrote-" not in tried, tried
    assert tried.count("Permission denied") >= 5, tried
    assert "forged" not in played.sandbox.exec(["/bin/ls", "/tmp"])[1]
