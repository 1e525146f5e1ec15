"""Escape attempts on Docker: the network to the host's loopback, mounts, the Docker
socket, pid 1's root and environment, setuid and capabilities, kernel knobs. Each must
fail inside the container, and the session stay usable with every turn saved."""

from __future__ import annotations

import socket
import threading

import pytest
from conftest import wait_until

pytestmark = pytest.mark.docker


class Listener:
    """A TCP listener on the host's 127.0.0.1 that counts who connects."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self):
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted += 1
            conn.close()

    def close(self):
        self._stop.set()
        self._thread.join()
        self.sock.close()


@pytest.fixture
def listener():
    server = Listener()
    yield server
    server.close()


def _reach(port: int) -> str:
    """An action that tries the host's loopback listener every way a container might."""
    targets = ["127.0.0.1", "localhost", "172.17.0.1", "host.docker.internal", "$(ip route 2>/dev/null | awk '/default/ {print $3}')"]
    tries = "; ".join(f"timeout 2 bash -c 'exec 3<>/dev/tcp/{t}/{port}' 2>/dev/null && echo reached-{i}"
                      for i, t in enumerate(targets))
    tries += f"; python3 -c 'import socket; s=socket.socket(); s.settimeout(2); s.connect((\"127.0.0.1\", {port}))' 2>/dev/null && echo reached-py"
    return tries + "; echo tried"


def test_no_network_cannot_reach_a_host_loopback_listener(play_docker, listener):
    played = play_docker()
    # the test's own connection proves the listener answers
    socket.create_connection(("127.0.0.1", listener.port), timeout=2).close()
    assert wait_until(lambda: listener.accepted == 1, 5)
    turn = played.act(_reach(listener.port))
    assert "reached" not in turn.observation and turn.observation.endswith("tried\n"), turn.observation
    assert listener.accepted == 1
    played.assert_usable()
    played.assert_all_saved()


def test_a_task_with_network_cannot_reach_a_host_loopback_listener(docker_client, bash_image, listener, image_sandbox):

    box = image_sandbox(docker_client, bash_image, network=True, timeout=20)
    box.start()
    try:
        result = box.run(_reach(listener.port))
        assert "reached" not in result.output and result.output.endswith("tried\n"), result.output
        assert listener.accepted == 0
    finally:
        box.close()


ESCAPES = {
    "mount-tmpfs": "mount -t tmpfs none /mnt",
    "remount-rw-proc-sys": "mount -o remount,rw /proc/sys",
    "bind-mount": "mount --bind /testbed /mnt",
    "docker-socket": "ls /var/run/docker.sock /run/docker.sock",
    "proc-1-root": "ls /proc/1/root/",
    "proc-1-environ": "cat /proc/1/environ",
    "sysrq": "echo h > /proc/sysrq-trigger",
    "nsenter": "nsenter --target 1 --mount --uts --ipc --net --pid true",
    "unshare-user": "unshare --user --map-root-user true",
    "kernel-module": "echo 1 > /proc/sys/kernel/modules_disabled",
    "raw-disk": "mknod /tmp/disk b 253 0; mknod /tmp/disk2 b 8 0; head -c1 /tmp/disk || head -c1 /tmp/disk2",
}


@pytest.mark.parametrize("action", ESCAPES.values(), ids=ESCAPES.keys())
def test_escape_attempts_fail(play_docker, action):
    played = play_docker()
    turn = played.act(action)
    assert turn.exit_code not in (0, None), turn.observation
    played.assert_usable()
    played.assert_all_saved()


def test_setuid_gains_nothing_and_capabilities_are_few(play_docker):
    played = play_docker()
    status = played.act("grep -E '^(NoNewPrivs|CapBnd|CapEff)' /proc/self/status").observation
    fields = dict(line.split(":\t") for line in status.splitlines())
    assert fields["NoNewPrivs"] == "1"
    bound = int(fields["CapBnd"], 16)
    for cap in (21, 16, 17, 19, 25):      # sys_admin, sys_module, sys_rawio, sys_ptrace, sys_time
        assert not bound & (1 << cap), (cap, status)
    # a setuid copy of bash runs with no more than the caller has
    turn = played.act("cp /bin/bash /tmp/sbash && chmod u+s /tmp/sbash && "
                      "/tmp/sbash -p -c 'grep CapEff /proc/self/status'")
    assert turn.observation.strip().split(":\t")[1] == fields["CapEff"]
    played.assert_usable()
    played.assert_all_saved()
