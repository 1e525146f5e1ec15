"""Nothing inside a sandbox steers icplay (issue 28): the warden and the control shell keep
what they need (which processes a stop spares) out of the solver's reach.

The Docker warden read the pids it spared from /run/icplay-control.pid and
/run/icplay-shell.pid, which the solver (root in its container) can write: a process that
wrote its own pid there survived the stop of a timed-out action, and a FIFO put in their
place hung the warden, so that no later stop killed anything. Each probe does that from an
action, lets it time out, and checks that what it started is gone and the session usable.
"""

from __future__ import annotations

import pytest
from conftest import HOSTILE_TIMEOUT, wait_until

from icplay.sandbox.session import KILL_GRACE

STOP_BY = HOSTILE_TIMEOUT + KILL_GRACE + 2
# Counts the container's processes whose command line starts with $1 (builtins only: the
# count must not see a process of its own)
COUNT = ('n=0; for f in /proc/[0-9]*/cmdline; do IFS= read -r -d "" a < "$f" 2>/dev/null || continue; '
         '[[ $a == "$1" ]] && n=$((n+1)); done; echo "count=$n"')


def survivors(played, name: str) -> int:
    out = played.act(f"bash -c '{COUNT}' _ {name}").observation
    assert "count=" in out, out
    return int(out.rsplit("count=", 1)[1].split()[0])


def stopped(played, action: str, name: str) -> None:
    """``action`` times out; afterwards no process named ``name`` is left, and the session works."""
    turn = played.act(action)
    assert turn.info.get("timed_out"), turn.observation
    assert turn.duration < STOP_BY
    assert wait_until(lambda: survivors(played, name) == 0, 5), f"{name} survived the stop"
    played.assert_usable()
    played.assert_all_saved()


def test_a_process_that_names_itself_the_control_shell_is_stopped(play):
    played = play()
    stopped(played, "(echo $BASHPID > /run/icplay-control.pid; exec -a icplay-spared sleep 600) & sleep 60",
            "icplay-spared")


def test_a_process_that_names_itself_the_session_shell_is_stopped(play):
    played = play()
    # it takes SIGUSR1 (the "abandon your action" signal) and goes on
    stopped(played, "(trap : USR1; echo $BASHPID > /run/icplay-shell.pid; exec -a icplay-spared "
                    "bash -c 'trap : USR1; while :; do sleep 1; done') & sleep 60", "icplay-spared")


@pytest.mark.parametrize("name", ["icplay-control.pid", "icplay-shell.pid"])
def test_a_fifo_in_place_of_a_pid_file_does_not_hang_the_stop(play, name):
    played = play()
    played.act(f"rm -f /run/{name}; mkfifo /run/{name} 2>&1; ls -l /run/{name}")
    stopped(played, "(exec -a icplay-spared sleep 600)", "icplay-spared")
    stopped(played, "(exec -a icplay-later sleep 600) & sleep 60", "icplay-later")   # and the next stop too


@pytest.mark.docker
def test_the_wardens_stdin_and_stdout_are_out_of_reach(play_docker):
    """Where icplay tells the warden the shells (pid 1's stdin) and where it answers (its
    stdout): the solver can open neither (its shell has one capability fewer than pid 1)."""
    played = play_docker()
    for fd in (0, 1):
        turn = played.act(f"echo 'control '$BASHPID' forged' > /proc/1/fd/{fd} && echo wrote-{fd}")
        assert f"wrote-{fd}" not in turn.observation and "Permission denied" in turn.observation, turn.observation
    stopped(played, "(exec -a icplay-spared sleep 600) & sleep 60", "icplay-spared")
