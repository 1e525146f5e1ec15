"""The attached streams of a faithful container's pid 1 (``icplay/sandbox/faithful.py``),
over a real socket pair standing for Docker's attach connection (read through the
Docker sandbox's own frame splitting): the warden's ready notice
is found wherever Docker's frames cut it, and a pid 1 that never gets ready is a clear error."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from icplay.sandbox.base import SandboxError
from icplay.sandbox.streams import ExecSocketTransport as _ExecSocketTransport
from icplay.sandbox.faithful import Pid1Streams, shell_argv, unset_variables, warden

READY = b"\x1e0123456789abcdef\x1e\n"


def frame(payload: bytes, stream: int = 1) -> bytes:
    return bytes([stream, 0, 0, 0]) + len(payload).to_bytes(4, "big") + payload


@pytest.fixture
def pid1():
    ours, docker_side = socket.socketpair()
    streams = Pid1Streams(_ExecSocketTransport(ours))
    yield streams, docker_side
    streams.close()
    docker_side.close()


def test_the_ready_notice_is_found_across_frames(pid1):
    streams, docker = pid1
    streams.write(b"script\n")
    assert docker.recv(64) == b"script\n"

    def send_later():
        time.sleep(0.2)
        # a near miss first, then the notice cut in three frames, one of them cut mid-header
        data = frame(b"noise \x1e0123") + frame(READY[:7], stream=2) + frame(READY[7:12]) + frame(READY[12:])
        docker.sendall(data[:5])
        time.sleep(0.05)
        docker.sendall(data[5:])

    threading.Thread(target=send_later).start()
    streams.wait_for(READY, timeout=5)


def test_a_pid_1_that_never_gets_ready_is_an_error_naming_what_it_printed(pid1):
    streams, docker = pid1
    docker.sendall(frame(b"setarch: failed to set personality"))
    with pytest.raises(SandboxError, match="did not get ready; it printed: setarch: failed"):
        streams.wait_for(READY, timeout=0.5)
    docker.close()     # the container is gone: no waiting out the timeout
    with pytest.raises(SandboxError, match="did not get ready"):
        streams.wait_for(READY, timeout=60)


def test_the_shell_is_started_without_the_variables_bash_adds():
    assert unset_variables(["PATH=/bin", "SHLVL=3"]) == ("PWD", "_")
    assert 'e="env -u PWD -u SHLVL -u _"' in shell_argv(unset_variables(["PATH=/bin"]))[2]
    assert "env" not in shell_argv(())[2]
    assert READY not in warden(READY).encode()     # printed from octal escapes
