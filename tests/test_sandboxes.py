"""The persistent shell session on both real sandboxes: bubblewrap and Docker.

Each behaviour the foundation promises is driven for real: state that persists, timeouts
that keep partial output, interrupts, endless output, a shell that exits or is killed,
background jobs, and (on Docker) a fork bomb held by the pids limit.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest



@pytest.fixture(scope="module")
def bwrap_template(tmp_path_factory, bwrap_ready) -> Path:
    from icplay.sandbox.bwrap import make_root_template

    base = tmp_path_factory.mktemp("bwrap")
    testbed = base / "src"
    (testbed / "dir" / "sub").mkdir(parents=True)
    (testbed / "dir" / "sub" / "file.txt").write_text("hello\n")
    return make_root_template(testbed, None, base)


@pytest.fixture(params=["bwrap", pytest.param("docker", marks=pytest.mark.docker)])
def sandbox(request):
    if request.param == "bwrap":
        from icplay.sandbox.bwrap import BwrapSandbox

        box = BwrapSandbox(request.getfixturevalue("bwrap_template"))
    else:
        from icplay.sandbox.docker import DockerSandbox

        box = DockerSandbox(request.getfixturevalue("docker_client"), request.getfixturevalue("bash_image"))
    box.start()
    yield box
    box.close()


def test_cd_export_functions_and_aliases_persist(sandbox):
    assert sandbox.run("cd /tmp && mkdir -p deep/er && cd deep/er").exit_code == 0
    sandbox.run("export GREETING=hi; shout() { echo \"$1\"!; }; alias ll='echo aliased'")
    result = sandbox.run("pwd; echo $GREETING; shout loud; ll")
    assert result.output == "/tmp/deep/er\nhi\nloud!\naliased\n"
    assert result.cwd == "/tmp/deep/er"


def test_exit_codes_and_previous_status(sandbox):
    assert sandbox.run("false").exit_code == 1
    assert sandbox.run("echo $?").output == "1\n"
    assert sandbox.run("(exit 42)").exit_code == 42


def test_unbalanced_quote_does_not_swallow_the_session(sandbox):
    result = sandbox.run('echo "never closed')
    assert result.exit_code == 2 and "unexpected EOF" in result.output
    assert sandbox.run("echo fine").output == "fine\n"


def test_stderr_is_merged_and_bytes_decoded_with_replacement(sandbox):
    result = sandbox.run("echo out; echo err >&2; printf 'caf\\xc3\\xa9 \\xff\\n'")
    assert result.output == "out\nerr\ncafé \ufffd\n"


def test_cat_returns_at_once_because_stdin_is_dev_null(sandbox):
    result = sandbox.run("cat; read line; echo read=$?", timeout=5)
    assert not result.timed_out
    assert result.output == "read=1\n"


def test_timeout_keeps_partial_output_and_session(sandbox):
    sandbox.run("export KEEP=yes")
    result = sandbox.run("echo before; sleep 30; echo after", timeout=1)
    assert result.timed_out and result.exit_code is None
    assert result.output.startswith("before\n") and "after" not in result.output
    assert "timed out" in result.observation
    assert sandbox.run("echo $KEEP").output == "yes\n"
    assert result.duration < 10


def test_timeout_abandons_loops_and_nested_functions(sandbox):
    result = sandbox.run("f() { sleep 30; }; for i in 1 2 3; do f; done; echo finished", timeout=1)
    assert result.timed_out and "finished" not in result.output
    assert sandbox.run("echo ok").output == "ok\n"


def test_builtin_busy_loop_replaces_the_shell_and_says_so(sandbox):
    result = sandbox.run("while :; do :; done", timeout=1)
    assert result.timed_out
    after = sandbox.run("echo ok")
    assert after.output == "ok\n"


def test_interrupt_stops_the_running_command(sandbox):
    timer = threading.Timer(0.5, sandbox.interrupt)
    timer.start()
    result = sandbox.run("echo started; sleep 30", timeout=20)
    timer.join()
    assert result.interrupted and not result.timed_out
    assert result.output.startswith("started\n")
    assert "interrupted" in result.observation
    assert result.duration < 10
    assert sandbox.run("echo ok").output == "ok\n"


def test_endless_output_is_truncated_and_stopped(sandbox):
    result = sandbox.run("yes", timeout=30)
    assert result.stopped_for_output
    assert len(result.output.encode()) == sandbox.shell.output_cap
    assert result.truncated_bytes > 0
    assert "truncated" in result.observation
    assert result.duration < 25
    assert sandbox.run("echo ok").output == "ok\n"


def test_exit_and_kill_of_the_shell_are_recovered(sandbox):
    sandbox.run("cd /tmp; export GONE=1")
    died = sandbox.run("exit 3")
    assert died.shell_died and "shell exited" in died.observation
    fresh = sandbox.run("echo ${GONE:-unset}")
    assert fresh.output == "unset\n" and fresh.shell_restarted
    assert "new shell" in fresh.observation
    killed = sandbox.run("kill -9 $$")
    assert killed.shell_died
    assert sandbox.run("echo back").output == "back\n"


def test_background_job_does_not_block_the_turn(sandbox):
    start = time.monotonic()
    result = sandbox.run("sleep 1000 & echo started", timeout=5)
    assert result.output == "started\n" and not result.timed_out
    assert time.monotonic() - start < 3
    assert sandbox.run("echo next").output == "next\n"


def test_output_streams_while_the_command_runs(sandbox):
    seen: list[tuple[float, str]] = []
    start = time.monotonic()
    sandbox.run("echo one; sleep 1; echo two", on_output=lambda text: seen.append((time.monotonic() - start, text)))
    assert "".join(t for _, t in seen) == "one\ntwo\n"
    assert seen[0][1].startswith("one") and seen[0][0] < seen[-1][0]


def test_side_exec_sees_the_session_changes(sandbox):
    sandbox.run("echo new > /testbed/created.txt" if sandbox.kind == "bwrap" else "echo new > /testbed/created.txt")
    code, output = sandbox.exec(["git", "status", "--short"])
    assert code == 0
    assert "?? testbed/created.txt" in output.splitlines()


@pytest.mark.docker
def test_fork_bomb_is_held_by_the_pids_limit(docker_client, bash_image):
    from icplay.sandbox.docker import DockerSandbox

    box = DockerSandbox(docker_client, bash_image, limits={"pids_limit": 64})
    box.start()
    try:
        box.run(":(){ :|:& };:", timeout=3)
        # The bomb runs in the background, held at the pids limit; the shell still
        # answers (echo is a builtin), and the next timeout sweeps every stray process.
        assert "alive" in box.run("echo alive", timeout=5).output.splitlines()
        swept = box.run("while :; do :; done", timeout=1)
        assert swept.timed_out
        # The killed bomb's zombies are reaped by the warden (pid 1) within moments.
        deadline = time.monotonic() + 20
        while True:
            result = box.run("echo alive; ls / >/dev/null && echo listed", timeout=5)
            if result.output == "alive\nlisted\n" or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert result.output == "alive\nlisted\n"
        # ... and gone from the process table: zombies count until pid 1 reaps them, which
        # on a loaded machine can lag behind the shell answering again. Until then they hold
        # pids: bash's fork may say "bash: fork: retry: Resource temporarily unavailable"
        # before it gets one (or fail: no count yet), so the count is the output's last line.
        while True:
            said = box.run("ls -d /proc/[0-9]* 2>/dev/null | wc -l", timeout=5).output.split()
            count = int(said[-1]) if said and said[-1].isdigit() else 64
            if count < 10 or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert count < 10
    finally:
        box.close()


@pytest.mark.docker
def test_network_is_off_and_limits_apply(docker_client, bash_image):
    from icplay.sandbox.docker import DockerSandbox

    box = DockerSandbox(docker_client, bash_image)
    box.start()
    try:
        attrs = docker_client.api.inspect_container(box.container.id)
        assert attrs["HostConfig"]["NetworkMode"] == "none"
        assert attrs["HostConfig"]["PidsLimit"] == 256
        # the memory limit covers the tmpfs roots too: 1 GiB for processes + 2 GiB of files
        assert attrs["HostConfig"]["Memory"] == 3 * 1024 ** 3
        assert attrs["HostConfig"]["ReadonlyRootfs"] is True
        assert attrs["HostConfig"]["Tmpfs"]["/testbed"].endswith(f"size={2 * 1024 ** 3}")
        assert attrs["HostConfig"]["Privileged"] is False
        assert box.run("ls /sys/class/net").output.split() == ["lo"]
    finally:
        box.close()


@pytest.mark.docker
def test_leftover_containers_are_reaped(docker_client, bash_image, monkeypatch):
    import os
    import uuid

    from icplay.sandbox import tracking
    from icplay.sandbox.docker import reap_leftovers

    # A container labelled as if a crashed icplay (a pid that is gone) had left it. Every icplay
    # process reaps its host's leftovers when it first talks to Docker, other test workers too,
    # and one of them took the orphan first in a CI run: the containers name a host of this
    # test's own, which only this process (told it is that host) judges.
    host = f"reap-test-{uuid.uuid4().hex[:8]}"
    monkeypatch.setattr(tracking.socket, "gethostname", lambda: host)
    orphan = docker_client.containers.run(
        bash_image, command=["sleep", "600"], detach=True,
        labels={"icplay": "1", "icplay.pid": "999999999", "icplay.host": host})
    live = docker_client.containers.run(
        bash_image, command=["sleep", "600"], detach=True,
        labels={"icplay": "1", "icplay.pid": str(os.getpid()), "icplay.host": host})
    try:
        assert reap_leftovers(docker_client) >= 1
        # the low-level list reads labels in one call; the high-level one inspects each
        # container and fails when another icplay process removes one meanwhile
        ids = {c["Id"] for c in docker_client.api.containers(all=True, filters={"label": "icplay=1"})}
        assert orphan.id not in ids
        assert live.id in ids
    finally:
        live.remove(force=True)
        tracking.remove_container(docker_client, orphan.id)   # still there only if the reap failed


@pytest.mark.docker
def test_closed_sandbox_leaves_no_container(docker_client, bash_image):
    from icplay.sandbox.docker import DockerSandbox

    box = DockerSandbox(docker_client, bash_image)
    box.start()
    cid = box.container.id
    box.close()
    # the low-level list reads ids in one call; the high-level one inspects each container and
    # fails when another process removes one meanwhile
    assert cid not in {c["Id"] for c in docker_client.api.containers(all=True)}


@pytest.mark.docker
def test_memory_bomb_is_held_by_the_memory_limit(docker_client, bash_image):
    from icplay.sandbox.docker import DockerSandbox

    box = DockerSandbox(docker_client, bash_image, limits={"mem_limit": "256m", "memswap_limit": "256m"},
                        disk_limit="256m")
    box.start()
    try:
        result = box.run("python3 -c 'x = bytearray(1024 ** 3); print(len(x))'; echo status=$?", timeout=30)
        assert "1073741824" not in result.output
        assert box.run("echo still here").output.endswith("still here\n")
    finally:
        box.close()
