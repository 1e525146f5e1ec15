"""Tampering with the session's own shell must not break the session for good.

Each action below leaves the shell unfit for the next action (no file can be opened,
limits lowered for good, the shell replaced or killed) or
exits it. The next action must run in a working shell, with a note saying the shell was
replaced; every turn is saved. These hold on both sandboxes (the session is shared).
"""

from __future__ import annotations

import pytest

TAMPER = {
    "ulimit-n": ("ulimit -n 1", "could no longer open files"),
    "ulimit-n-soft-then-hard": ("ulimit -Sn 3; ulimit -Hn 3", "could no longer open files"),
    "ulimit-u": ("ulimit -u 1", "resource limits were changed"),
    "ulimit-f": ("ulimit -f 0", "resource limits were changed"),
    "exec-bash": ("exec bash --norc", "shell exited"),     # its stdin is /dev/null
    "exec-sleep": ("exec sleep 1", "shell exited"),
    "exit": ("exit 3", "shell exited"),
    "kill-9": ("kill -9 $$", "shell exited"),
    "set-e-then-fail": ("set -e; false; echo not-reached", "shell exited"),
}


@pytest.mark.parametrize("action, note", TAMPER.values(), ids=TAMPER.keys())
def test_tampered_shell_is_replaced_at_once(play, action, note):
    played = play()
    played.act("export BEFORE=1")
    turn = played.act(action)
    after = played.act("echo ${BEFORE:-reset}; ls /testbed >/dev/null && echo usable")
    notes = " ".join(turn.info["notes"] + after.info["notes"])
    assert note in notes, notes
    assert after.observation.startswith("reset\nusable\n"), after.observation
    assert turn.info.get("restart_reason") or turn.info["shell_died"] or after.info["shell_restarted"]
    if turn.info.get("restart_reason"):
        # the shell started in its place is the one that ran `after` (not killed late)
        assert not after.info["shell_restarted"], after.observation
    played.assert_usable()
    played.assert_all_saved()


def test_set_e_is_switched_off_with_a_note_and_the_shell_kept(play):
    played = play()
    played.act("export KEEP=1")
    turn = played.act("set -e")
    assert "set -e" in " ".join(turn.info["notes"]) and turn.exit_code == 0
    failed = played.act("false")
    assert failed.exit_code == 1 and not failed.info["shell_died"]
    assert played.act("echo $KEEP").observation == "1\n"
    played.assert_all_saved()


def test_functions_and_aliases_named_like_builtins_do_not_break_the_marker(play):
    played = play()
    played.act("printf() { echo hijacked; }; alias builtin=false; trap() { :; }; declare() { :; }")
    turn = played.act("echo still; command printf 'x\\n'")
    assert turn.observation == "still\nx\n" and turn.exit_code == 0
    played.assert_all_saved()


def test_stderr_and_stdin_tampering(play):
    played = play()
    played.act("exec 2>/dev/null")
    turn = played.act("echo to-stdout; echo to-stderr >&2; cat; read -r line; echo read=$?")
    assert "to-stdout" in turn.observation and "read=1" in turn.observation
    played.assert_usable()


@pytest.mark.parametrize("action", ["cat", "read -r x; echo got=$?", "head -1", "cat /dev/stdin",
                                    "cat <&0", "python3 -c 'import sys; print(len(sys.stdin.read()))'"])
def test_stdin_readers_return_at_once(play, action):
    played = play()
    turn = played.act(action)
    assert not turn.info["timed_out"], turn.observation
    played.assert_usable()


def test_the_shell_has_no_functions_to_remove(play):
    # the action runs with no function of icplay's defined (session.command_loop): naming
    # them changes nothing, the shell and its state are kept
    played = play()
    played.act("export KEEP=1")
    turn = played.act("unset -f __ic_run __ic_status __ic_dbg; declare -F")
    assert turn.observation == "" and turn.exit_code == 0 and not turn.info["notes"], turn.info
    assert played.act("echo $KEEP").observation == "1\n"
    played.assert_all_saved()
