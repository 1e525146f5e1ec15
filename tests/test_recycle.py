"""Recycling Docker containers between episodes: pristine again, or refused.

Every test drives a real container. "Pristine" is checked against a fresh container of
the same image: the restorable roots byte for byte (names, types, modes, owners, sizes,
mtimes, link targets, contents), the rest of the file system by names, types, modes and
sizes, git's view, and the processes.
"""

from __future__ import annotations

import pytest

from icplay.envs.bash_facts import gather
from icplay.sandbox.docker import DockerSandbox
from icplay.sandbox.pool import SandboxPool
from icplay.sandbox.recycle import DEFAULT_ROOTS, SCORING_SCRATCH

pytestmark = pytest.mark.docker

ROOTS = " ".join(DEFAULT_ROOTS)
# Everything outside the pseudo file systems and icplay's own files; times only where
# the recycle restores them (the roots).
FINGERPRINT = (
    f"find {ROOTS} -printf '%p %y %m %u %g %s %T@ %l\\n' 2>/dev/null | LC_ALL=C sort; "
    f"find {ROOTS} -type f -exec md5sum {{}} + 2>/dev/null | LC_ALL=C sort; "
    "find / -xdev \\( -path /proc -o -path /sys -o -path /dev -o -path '/run/icplay-*' \\) -prune "
    "-o -printf '%p %y %m %s\\n' | LC_ALL=C sort | md5sum; "
    "git -C / status --short; "
    # processes, but the warden's sleep (killed by a recycle and started again at once)
    "ps -eo ppid=,comm= | grep -vc '^ *1 sleep$'"
)


@pytest.fixture
def box(docker_client, bash_image):
    sandbox = DockerSandbox(docker_client, bash_image)
    sandbox.start()
    yield sandbox
    sandbox.close()


@pytest.fixture
def open_box(docker_client, bash_image):
    """A container with a writable root filesystem (as on images that are not icplay's),
    where changes outside the roots can happen and the proof must catch them."""
    sandbox = DockerSandbox(docker_client, bash_image, disk_limit=None)
    sandbox.start()
    assert not sandbox.bounded
    yield sandbox
    sandbox.close()


@pytest.fixture(scope="module")
def fresh_fingerprint(docker_client, bash_image) -> str:
    sandbox = DockerSandbox(docker_client, bash_image)
    sandbox.start()
    try:
        return sandbox.exec(["bash", "-c", FINGERPRINT])[1]
    finally:
        sandbox.close()


def fingerprint(sandbox: DockerSandbox) -> str:
    return sandbox.exec(["bash", "-c", FINGERPRINT])[1]


def test_a_new_container_is_ready_to_recycle_and_hardened(box):
    assert box.recyclable, box.last_recycle_note
    caps = box.run("grep CapBnd /proc/self/status").output
    control = box.control.run("grep CapBnd /proc/self/status").output
    assert caps != control      # the session's shell has one capability fewer
    # and the side commands, which read the solver's files, have the session's set
    assert box.exec(["grep", "CapBnd", "/proc/self/status"])[1] == caps


def test_read_only_episode_recycles_without_restoring(box, fresh_fingerprint):
    box.run("ls -la /testbed; cat /testbed/README.md; find /testbed -name '*.py' | wc -l")
    gather(box)      # what the reward does: its private git folder comes and goes in the scratch root
    assert box.recycle(), box.last_recycle_note
    assert box.last_recycle_note in ("icplay-pristine", f"icplay-pristine {SCORING_SCRATCH}")
    assert fingerprint(box) == fresh_fingerprint


@pytest.mark.parametrize("action", [
    "echo new > /testbed/new.txt; rm /testbed/README.md; chmod 700 /testbed/docs",
    "touch -d 2001-01-01 /testbed/config/app.conf; ln -s /etc/passwd /testbed/link; mkdir -p /testbed/a/b/c",
    "ln /testbed/README.md /tmp/hard; echo more >> /testbed/README.md; mv /testbed/logs /testbed/old_logs",
    "rm -rf /testbed/* /testbed/.[!.]*; echo x > /root/.bash_history; mkdir /var/tmp/q",
    "cd /testbed && tar czf /tmp/all.tgz . && git -C / status --short >/dev/null",
    "chmod 000 /testbed/data; chown 1234:1234 /testbed/home/alice; mkfifo /testbed/fifo",
])
def test_changes_inside_the_roots_are_restored(box, fresh_fingerprint, action):
    box.run(action)
    assert box.recycle(), box.last_recycle_note
    assert box.last_recycle_note.startswith("icplay-pristine ")
    assert fingerprint(box) == fresh_fingerprint
    # and again: the restored state itself recycles cleanly
    box.run("echo again > /testbed/again")
    assert box.recycle(), box.last_recycle_note
    assert fingerprint(box) == fresh_fingerprint


@pytest.mark.parametrize("action, why", [
    ("echo evil >> /etc/passwd", "/etc/passwd"),
    ("mkdir /newdir", ("/newdir", "/ changed its entries")),
    ("rm /usr/bin/tree", "/usr"),
    ("chmod 700 /etc", "/etc"),
    ("touch -d 2001-01-01 /usr/share/doc", "/usr"),
    ("echo x > /run/icplay-pristine/testbed/README.md", "icplay-pristine"),
    ("echo x > /dev/shm/left", "/dev/shm"),
    ("echo 10.0.0.1 evil >> /etc/hosts", "/etc/hosts"),
    ("echo x > /testbed/new && git -C / add -A", "/.git"),
    ("rm /.git/description", "/.git"),
    ("python3 -c 'import ctypes; l=ctypes.CDLL(None); print(l.shmget(1234, 4096, 0o1666))'", "IPC"),
])
def test_changes_elsewhere_refuse_the_recycle(open_box, action, why):
    result = open_box.run(action)
    assert result.exit_code == 0, result.output
    assert not open_box.recycle()
    whys = why if isinstance(why, tuple) else (why,)
    note = open_box.last_recycle_note
    assert "not pristine" in note and any(w in note for w in whys), note


@pytest.mark.parametrize("action", ["echo evil >> /etc/passwd", "mkdir /newdir", "rm /usr/bin/tree",
                                    "echo 10.0.0.1 evil >> /etc/hosts", "touch /usr/local/bin/find"])
def test_on_icplays_image_nothing_outside_the_roots_can_change(box, fresh_fingerprint, action):
    assert box.bounded
    result = box.run(action)
    assert result.exit_code != 0 and "Read-only file system" in result.output, result.output
    assert box.recycle(), box.last_recycle_note
    assert fingerprint(box) == fresh_fingerprint


def test_a_planted_tool_cannot_fool_the_proof(box):
    # The proof's tools (find, cp, stat) come from the image's read-only root: a fake
    # `find` that hides every change cannot be planted, not even in a writable root the
    # proof might search (the control shell's PATH has none of them).
    fake = "#!/bin/sh\nexit 0\n"
    for folder in ("/usr/local/bin", "/usr/bin", "/bin"):
        result = box.run(f"printf '{fake}' > {folder}/find && chmod +x {folder}/find")
        assert result.exit_code != 0, result.output
    path = box.exec(["bash", "-c", "echo $PATH"])[1].strip().split(":")
    assert not any(p.startswith(("/testbed", "/root", "/home", "/opt", "/tmp", "/var/tmp", "/run")) for p in path)
    box.run("printf '#!/bin/sh\nexit 0\n' > /testbed/find; chmod +x /testbed/find; echo x > /testbed/changed")
    assert box.recycle(), box.last_recycle_note
    assert box.last_recycle_note == "icplay-pristine /testbed"       # the change was found and undone
    assert "changed" not in box.run("ls /testbed").output


def test_processes_left_behind_are_killed(box, fresh_fingerprint):
    box.run("sleep 1000 & nohup sleep 999 >/dev/null 2>&1 & setsid sleep 998 & "
            "(trap '' TERM HUP; while :; do sleep 1; done) &")
    assert box.recycle(), box.last_recycle_note
    procs = box.exec(["ps", "-eo", "pid,ppid,comm"])[1]
    assert "sleep 99" not in procs and procs.count("sleep") <= 1   # only the warden's own
    assert fingerprint(box) == fresh_fingerprint


def test_a_fork_bomb_is_cleared(box, fresh_fingerprint):
    result = box.run(":(){ :|:& };:", timeout=3)
    assert result.timed_out or result.exit_code is not None
    assert box.recycle(), box.last_recycle_note
    assert fingerprint(box) == fresh_fingerprint


def test_the_next_shell_is_new(box):
    box.run("cd /testbed/docs; export SECRET=1; f() { echo hi; }; alias ll='ls -l'; trap 'echo trapped' EXIT")
    assert box.recycle()
    first = box.run("echo ${SECRET:-unset} $(type -t f || echo nofunc) $PWD")
    assert first.output.split() == ["unset", "nofunc", "/testbed"]
    assert first.notes == []    # not reported as a restart


def test_the_agent_cannot_ptrace_the_warden_or_the_control_shell(box):
    control_pid = box.control.pid
    script = ("import ctypes, sys; l = ctypes.CDLL(None, use_errno=True); "
              "print([(l.ptrace(16, int(p), 0, 0), ctypes.get_errno()) for p in sys.argv[1:]])")
    out = box.run(f"python3 -c '{script}' 1 {control_pid}").output
    assert out.strip() == "[(-1, 1), (-1, 1)]"     # EPERM both
    assert "Permission denied" in box.run("cat /proc/1/environ").output


def test_killing_the_control_shell_loses_the_recycle_but_not_the_scoring(box):
    box.run(f"kill -9 {box.control.pid}")
    code, out = box.exec(["git", "status", "--short"])
    assert code == 0 and out == ""                  # through docker exec now
    assert not box.recycle()


def test_pool_hands_back_the_recycled_container_or_a_new_one(docker_client, bash_image):
    pool = SandboxPool(lambda: DockerSandbox(docker_client, bash_image, disk_limit=None), spares=0)
    try:
        first = pool.take()
        first_id = first.container.id
        first.run("echo x > /testbed/x")
        pool.discard(first)
        second = pool.take()
        assert second.container.id == first_id and pool.recycled == 1
        assert "x" not in second.run("ls /testbed").output.split()
        second.run("echo x >> /etc/passwd")
        pool.discard(second)
        third = pool.take()
        assert third.container.id != first_id and pool.started == 2
        pool.discard(third)
    finally:
        pool.close()


def test_without_recycling_every_episode_gets_a_new_container(docker_client, bash_image):
    pool = SandboxPool(lambda: DockerSandbox(docker_client, bash_image, recycle=False), spares=0, recycle=False)
    try:
        first = pool.take()
        first_id = first.container.id
        pool.discard(first)
        second = pool.take()
        assert second.container.id != first_id and pool.recycled == 0
        pool.discard(second)
    finally:
        pool.close()


def test_trusted_sandbox_keeps_its_shell_across_recycles(docker_client, bash_image):
    box = DockerSandbox(docker_client, bash_image, trusted=True)
    box.start()
    try:
        pid = box.shell.pid
        box.run("(\ncd /testbed && echo made > made.txt\n)")
        assert box.recycle(), box.last_recycle_note
        assert box.shell.pid == pid
        assert box.run("ls /testbed/made.txt; pwd").output.split()[-1] == "/testbed"
        assert "No such file" in box.run("ls /testbed/made.txt").output
    finally:
        box.close()


class _LateShell(DockerSandbox):
    """A session shell that opens only after the control shell has taken the pristine
    copies, as happens on a loaded machine (they start concurrently)."""

    def _open(self, which: str):
        if which == "shell":
            import time

            time.sleep(1.0)
        return super()._open(which)


def test_a_session_shell_that_starts_late_does_not_spoil_the_recycle(docker_client, bash_image, fresh_fingerprint):
    # The cause of "not pristine: /run changed its entries or mode" on a loaded machine:
    # the session shell made its pid file in /run after the pristine mark.
    box = _LateShell(docker_client, bash_image)
    box.start()
    try:
        box.run("echo x > /testbed/x")
        assert box.recycle(), box.last_recycle_note
        assert fingerprint(box) == fresh_fingerprint
    finally:
        box.close()
