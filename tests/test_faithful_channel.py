"""The stream of a faithful container's pid 1 (``icplay/sandbox/faithful.py``), over a real
socket pair standing for Docker's attach connection: Docker's frames are split into the
shells' output, and the warden's notice ends one shell's stream wherever the frames cut it."""

from __future__ import annotations

import socket

import pytest

from icplay.sandbox.base import SandboxError
from icplay.sandbox.faithful import Pid1Channel, unset_variables, warden

NOTICE = b"\x1e0123456789abcdef\x1e\n"


def frame(payload: bytes, stream: int = 1) -> bytes:
    return bytes([stream, 0, 0, 0]) + len(payload).to_bytes(4, "big") + payload


def read_all(shell) -> bytes:
    out = b""
    while True:
        chunk = shell.read()
        if not chunk:
            return out
        out += chunk


@pytest.fixture
def channel():
    ours, docker_side = socket.socketpair()
    pid1 = Pid1Channel(ours, NOTICE)
    yield pid1, docker_side
    pid1.close()
    docker_side.close()


def test_a_notice_cut_by_frames_ends_the_shell_and_nothing_is_lost(channel):
    pid1, docker = channel
    shell = pid1.open_shell()
    assert docker.recv(16) == b"go\n"
    # output that looks like the notice's start, then the notice cut in three frames
    docker.sendall(frame(b"out\x1e0123") + frame(b"\x1e") + frame(b"more\x1e01234567")
                   + frame(b"89abcdef\x1e") + frame(b"\nlate"))
    assert read_all(shell) == b"out\x1e0123\x1emore"
    assert shell.gone.is_set() and not pid1.busy()
    with pytest.raises(OSError):
        shell.write(b"x")
    # what comes between shells belongs to none; the next shell gets its own
    second = pid1.open_shell()
    docker.sendall(frame(b"next ") + frame(b"warden says", stream=2) + frame(NOTICE[:5]))
    docker.sendall(frame(NOTICE[5:]))
    assert read_all(second) == b"next warden says"


def test_a_second_shell_is_refused_while_the_first_runs(channel):
    pid1, docker = channel
    first = pid1.open_shell()
    with pytest.raises(SandboxError, match="still running"):
        pid1.open_shell()
    docker.sendall(frame(b"a marker-like \x1e\n line"))
    assert first.read() == b"a marker-like \x1e\n line"
    docker.close()            # the container is gone: the shell's stream ends
    assert read_all(first) == b"" and first.gone.is_set()


def test_the_warden_starts_the_shell_without_the_variables_bash_adds():
    assert unset_variables(["PATH=/bin", "SHLVL=3"]) == ("PWD", "_")
    script = warden(NOTICE, unset_variables(["PATH=/bin"]))
    assert "exec env -u PWD -u SHLVL -u _ bash --noprofile --norc" in script
    assert NOTICE not in script.encode()     # printed from octal escapes
