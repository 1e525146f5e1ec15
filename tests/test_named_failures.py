"""The handlers issue 31 narrowed or made to report: each catches the failure it names (and
says so), and lets everything else through. Fakes stand in for what fails: the failures are
the point, and no real sandbox or daemon fails on request."""

from __future__ import annotations

import logging
import threading

import pytest

from icplay.episode import Trajectory
from icplay.formats.export import task_indexes
from icplay.frontend.leases import SandboxPool as EnvPool
from icplay.python.values import decode_value
from icplay.sandbox.base import SandboxCapabilities, SandboxError
from icplay.sandbox.images import docker_client
from icplay.sandbox.pool import SandboxPool
from icplay.sandbox.session import PersistentShell, ShellControl


class FlakySandbox:
    """A sandbox whose start, recycle or close fails as told (``error``: what it raises)."""

    capabilities = SandboxCapabilities(runs_images=False, recyclable=True, replaces_dead=False)

    def __init__(self, fail: set[str], error: Exception):
        self.fail, self.error = fail, error
        self.closed = threading.Event()

    def _maybe(self, what: str) -> None:
        if what in self.fail:
            raise self.error

    def start(self) -> None:
        self._maybe("start")

    def recycle(self) -> bool:
        self._maybe("recycle")
        return True

    def close(self) -> None:
        self.closed.set()
        self._maybe("close")


def test_a_sandbox_whose_recycle_fails_is_closed_said_and_never_handed_out(caplog):
    made: list[FlakySandbox] = []

    def make() -> FlakySandbox:
        made.append(FlakySandbox({"recycle"}, RuntimeError("a plug-in's bug")))
        return made[-1]

    pool = SandboxPool(make, spares=0)   # type: ignore[arg-type]  # a fake of the Sandbox protocol
    try:
        first = pool.take()
        with caplog.at_level(logging.WARNING, logger="icplay.sandbox.pool"):
            pool.discard(first)
            second = pool.take()          # waits for the recycle, which failed: a new one
        assert second is not first and first.closed.is_set()
        assert "could not be recycled: RuntimeError: a plug-in's bug" in caplog.text
    finally:
        pool.close()


def test_a_close_that_fails_after_a_failed_recycle_is_said_and_the_pool_goes_on(caplog):
    pool = SandboxPool(lambda: FlakySandbox({"recycle", "close"}, OSError("gone")), spares=0)  # type: ignore[arg-type]
    try:
        with caplog.at_level(logging.WARNING, logger="icplay.sandbox.pool"):
            pool.discard(pool.take())
            assert pool.take() is not None
        assert "could not be closed: OSError: gone" in caplog.text
    finally:
        pool.close()


def test_a_failed_start_raises_its_own_error_even_when_close_fails_too():
    box = FlakySandbox({"start", "close"}, SandboxError("no room"))
    pool = SandboxPool(lambda: box, spares=0)   # type: ignore[arg-type]
    try:
        with pytest.raises(SandboxError, match="no room"):
            pool.take()
        assert box.closed.is_set()
    finally:
        pool.close()


class Inbox:
    def __init__(self) -> None:
        self.fed: list[bytes] = []
        self.ended = False

    def feed(self, data: bytes) -> None:
        self.fed.append(data)

    def end(self) -> None:
        self.ended = True


class Transport:
    def __init__(self, error: Exception):
        self.chunks, self.error = [b"out"], error

    def read(self) -> bytes:
        if self.chunks:
            return self.chunks.pop()
        raise self.error


def test_the_shell_reader_ends_the_output_when_its_stream_is_closed_under_it():
    inbox = Inbox()
    PersistentShell._pump(Transport(OSError(9, "Bad file descriptor")), inbox)   # type: ignore[arg-type]
    assert inbox.fed == [b"out"] and inbox.ended


def test_the_shell_reader_raises_a_bug_but_still_ends_the_output():
    inbox = Inbox()
    with pytest.raises(KeyError):
        PersistentShell._pump(Transport(KeyError("a bug")), inbox)   # type: ignore[arg-type]
    assert inbox.ended


def test_a_docker_host_docker_cannot_parse_is_one_sentence(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "http://[::1")       # docker-py raises ValueError for it
    with pytest.raises(SandboxError, match="DOCKER_HOST=http://\\[::1"):
        docker_client(timeout=2)


@pytest.mark.parametrize("text", ["[" * 200_000, '["Decimal", "not a number"]'],
                         ids=["nested-past-the-parser", "decimal-text"])
def test_values_the_decoder_cannot_rebuild_are_value_errors(text):
    with pytest.raises(ValueError):
        decode_value(text)


def test_an_export_of_a_set_not_here_numbers_by_the_recorded_index():
    traj = Trajectory(task={"set": "no-such-set-here", "id": "t7", "index": 7}, env="bash", sandbox="", policy={})
    assert task_indexes([traj]) == {("no-such-set-here", "t7"): 7}


class ClosingEnv:
    name = "bash"

    def __init__(self, error: Exception | None):
        self.error, self.closed = error, False

    def close(self) -> None:
        self.closed = True
        if self.error is not None:
            raise self.error


def test_an_env_that_fails_to_close_is_said_and_the_others_are_closed(caplog):
    envs = [ClosingEnv(RuntimeError("a plug-in's close")), ClosingEnv(None)]
    made = iter(envs)
    pool = EnvPool(lambda kind, sandbox, image, progress: next(made), lambda kind: None)   # type: ignore[arg-type,return-value]
    for lease in (pool.lease("bash"), pool.lease("bash")):
        lease.give_back()
    with caplog.at_level(logging.WARNING, logger="icplay.frontend.leases"):
        pool.close(wait=1)
    assert all(env.closed for env in envs)
    assert "closing a bash env failed: RuntimeError: a plug-in's close" in caplog.text


def test_a_kind_whose_shell_controls_fail_is_said_and_the_shell_taken_for_alive(caplog):
    def fails(_pid: int) -> bool:
        raise ConnectionError("the engine went away")

    shell = PersistentShell(ShellControl(open=lambda: None, kill_command=fails, kill_shell=fails,  # type: ignore[arg-type,return-value]
                                         is_alive=fails))
    with caplog.at_level(logging.WARNING, logger="icplay.sandbox.session"):
        assert shell._shell_alive() is True
        shell._kill_shell()
        shell._kill_command()
    assert caplog.text.count("ConnectionError: the engine went away") == 3
