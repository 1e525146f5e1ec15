"""Hostile actions on the bwrap sandbox: each is contained within its limit and the
session is usable afterwards.

The sandboxes here get small limits (``SMALL``) so that bombs and fills hit them in
seconds; tests/test_bwrap_limits.py checks the defaults. These tests matter most when
run as root (CI is): then the action must not get the host's root. As a normal user the
same actions must be contained too; only what cannot apply (a dedicated host uid, the
host-side tmpfs) is skipped, with the reason.
"""

from __future__ import annotations

import os
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from icplay.paths import data_dir
from icplay.sandbox import limits as limits_mod
from icplay.sandbox.bwrap import BwrapSandbox, make_root_template, running_as_root
from icplay.sandbox.limits import MIB, Limits

pytestmark = pytest.mark.bwrap

SMALL = Limits(memory=256 * MIB, pids=64, cpus=1.0, disk=64 * MIB, small_tmpfs=8 * MIB)
SECRET = "sk-icplay-hostile-test-0123456789abcdef"
TIMEOUT = 3.0
# Time for the session to stop a command that hit a limit: its timeout, the kill grace and
# a shell restart, on a loaded 2-core machine.
BOUND = TIMEOUT + 15.0


@pytest.fixture(scope="module")
def template(tmp_path_factory, bwrap_ready) -> Path:
    folder = tmp_path_factory.mktemp("bwrap-hostile")
    return make_root_template(data_dir() / "bash" / "testbed", data_dir() / "bash" / "setup.sh", folder)


@pytest.fixture
def box(template, monkeypatch):
    # A secret in icplay's own environment, as an API key would be.
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    sandbox = BwrapSandbox(template, timeout=TIMEOUT, output_cap=64 * 1024, limits=SMALL)
    sandbox.start()
    yield sandbox
    sandbox.close()


def assert_usable(box: BwrapSandbox, keep: str | None = None) -> None:
    """The next action runs normally (and, with ``keep``, the shell's state survived)."""
    result = box.run("echo usable-$((6*7)) ${KEEP:-}", timeout=10)
    assert result.exit_code == 0, result.observation
    expected = f"usable-42 {keep}\n" if keep else "usable-42\n"
    assert result.output == expected, result.observation


def stop_leftovers(box: BwrapSandbox) -> float:
    """Processes an action left in the background (a bomb) run on until some action is
    stopped: then the session kills every process but the shell. Make one be stopped and
    return how long that took."""
    started = time.monotonic()
    result = box.run("sleep 60", timeout=TIMEOUT)
    assert result.timed_out or result.shell_died, result.observation[-500:]
    return time.monotonic() - started


def host_processes_of(uid: int) -> list[int]:
    """Live processes of ``uid`` on the host (a killed shell's bwrap init may linger as a
    zombie until the host's init reaps it: it holds no resource but its pid)."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid and \
                        not Path(f"/proc/{entry}/stat").read_text().rsplit(") ", 1)[1].startswith("Z"):
                    pids.append(int(entry))
            except (OSError, IndexError):
                pass
    return pids


# -- output -------------------------------------------------------------------------------

def test_endless_output_is_stopped_and_capped(box):
    box.run("export KEEP=kept")
    result = box.run("yes")
    assert result.stopped_for_output and len(result.output) <= 64 * 1024
    assert result.duration < BOUND
    assert_usable(box, "kept")


def test_huge_output_is_truncated(box):
    result = box.run("head -c 300000 /dev/zero | tr '\\0' a; echo")
    assert result.truncated_bytes > 0 and len(result.output) == 64 * 1024
    assert_usable(box)


def test_binary_output_arrives_decoded(box):
    result = box.run("head -c 20000 /dev/urandom; printf '\\377\\376\\000end'")
    assert result.exit_code == 0 and result.output.endswith("end")
    assert_usable(box)


# -- time -------------------------------------------------------------------------------------

def test_sleep_forever_times_out(box):
    box.run("export KEEP=kept")
    result = box.run("sleep infinity")
    assert result.timed_out and result.duration < BOUND
    assert_usable(box, "kept")


@pytest.mark.parametrize("reader", ["cat", "read line; echo got:$line", "head -c 10", "python3 -c 'input()'"])
def test_stdin_readers_get_end_of_file(box, reader):
    result = box.run(reader)
    assert not result.timed_out, result.observation
    assert_usable(box)


# -- processes, memory, CPU -----------------------------------------------------------------

def test_fork_bomb_is_contained_and_the_session_recovers(box):
    result = box.run(":(){ :|:& };:; sleep 60")
    assert result.timed_out and result.duration < BOUND, result.observation[-500:]
    # Usable, though not always with its state: bash retrying a fork sleeps through its
    # stop signal, and the session may replace it after its kill grace (noted in the output).
    assert_usable(box)


def test_background_fork_bomb_is_bounded_then_stopped(box):
    result = box.run(":(){ :|:& };:; sleep 1")
    assert result.duration < BOUND
    time.sleep(1)
    if box.host_uid is not None:
        assert len(host_processes_of(box.host_uid)) <= SMALL.pids + 2   # + the two bwrap processes
    assert stop_leftovers(box) < BOUND
    assert_usable(box)
    if box.host_uid is not None:
        assert len(host_processes_of(box.host_uid)) <= 3   # bwrap, its init and the shell


FORKER = """
import os, time
kids = []
while len(kids) < 500:
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    kids.append(pid)
print(len(kids), flush=True)
for pid in kids:
    os.kill(pid, 9)
    os.waitpid(pid, 0)
"""


def test_process_count_is_limited(box):
    result = box.run(f"python3 -c '{FORKER}'", timeout=15)
    counts = [line for line in result.output.splitlines() if line.strip().isdigit()]
    assert counts and 0 < int(counts[-1]) < SMALL.pids, result.observation
    assert_usable(box)


def test_memory_bomb_is_killed_and_the_session_recovers(box):
    box.run("export KEEP=kept")
    result = box.run("python3 -c 'x = []\nwhile True: x.append(bytearray(16 * 2**20))'", timeout=20)
    assert not result.timed_out and result.exit_code != 0, result.observation
    assert result.duration < BOUND
    # A smaller allocation still works: the limit is what stopped it, not a broken sandbox.
    small = box.run("python3 -c 'x = bytearray(64 * 2**20); print(len(x))'", timeout=20)
    assert small.output.strip() == str(64 * 2**20), small.observation
    assert_usable(box, "kept")


def test_a_memory_bomb_in_the_shell_itself_restarts_the_shell(box):
    result = box.run("s=xxxxxxxxxxxxxxxx; while :; do s=$s$s; done", timeout=20)
    assert result.duration < 20 + BOUND
    assert result.shell_died or result.timed_out
    assert_usable(box)


def test_cpu_is_bounded_to_its_share(box):
    if "cpu" not in limits_mod.mechanism().bounds:
        pytest.skip(f"no cgroup bounds CPU here ({limits_mod.mechanism().name}); RLIMIT_CPU bounds each process")
    # Two busy processes for 2 s of wall time: with 1 CPU they get at most ~2 CPU seconds.
    result = box.run("for i in 1 2; do timeout 2 sh -c 'while :; do :; done' & done; wait; times", timeout=10)
    children = result.output.strip().splitlines()[-1].split()

    def seconds(text: str) -> float:
        minutes, _, rest = text.partition("m")
        return int(minutes) * 60 + float(rest.rstrip("s"))

    used = seconds(children[0]) + seconds(children[1])
    assert used < 2.6, result.output


def test_daemons_left_running_die_with_the_sandbox(box):
    result = box.run("nohup sh -c 'while :; do sleep 1; done' >/dev/null 2>&1 & (setsid sleep 1000 &); echo left")
    assert result.output.strip() == "left" and result.duration < BOUND
    assert_usable(box)
    uid, process = box.host_uid, box._process
    box.close()
    assert process.poll() is not None
    if uid is not None:
        deadline = time.monotonic() + 5
        while host_processes_of(uid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert host_processes_of(uid) == []


# -- the shell itself ---------------------------------------------------------------------------

@pytest.mark.parametrize("action", ["exit", "exit 3", "kill -9 $$", "exec true"])
def test_the_shell_ending_itself_is_replaced_at_the_next_action(box, action):
    box.run("echo state > /testbed/kept.txt")
    result = box.run(action)
    assert result.shell_died and result.duration < BOUND
    follow = box.run("cat /testbed/kept.txt")
    assert follow.shell_restarted and follow.output == "state\n"   # the files outlive the shell


# -- disk ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("where", ["/testbed/fill", "/root/fill", "/tmp/fill", "/dev/shm/fill", "/run/fill"])
def test_disk_fill_hits_the_limit(box, where):
    if where.startswith(("/testbed", "/root")) and not box.disk_bounded:
        pytest.skip("the testbed is on the host's disk (a sized tmpfs needs root): only each file is bounded")
    result = box.run(f"dd if=/dev/zero of={where} bs=1M count=1000", timeout=30)
    assert not result.timed_out and result.duration < 30
    assert any(hit in result.output for hit in ("No space left", "File too large", "File size limit exceeded")), \
        result.observation
    size = box.run(f"stat -c %s {where}").output.strip()
    assert int(size) <= SMALL.disk
    # Many small files stop too, and deleting them gives the space back.
    many = box.run(f"mkdir -p {where}.d && for i in $(seq 100); do head -c 1M /dev/zero > {where}.d/$i || break; done"
                   f"; rm -rf {where} {where}.d; echo cleaned", timeout=30)
    assert many.output.strip().endswith("cleaned"), many.observation
    assert box.run(f"head -c 1M /dev/zero > {where} && echo written").output.strip() == "written"
    assert_usable(box)


def test_one_file_is_bounded_even_on_the_host_disk(box):
    result = box.run("dd if=/dev/zero of=/testbed/big bs=1M count=200 2>&1 | tail -1; stat -c %s /testbed/big",
                     timeout=30)
    assert int(result.output.strip().splitlines()[-1]) <= SMALL.disk
    assert_usable(box)


# -- network ------------------------------------------------------------------------------------

def test_a_listener_on_the_host_loopback_is_unreachable(box):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(5)
    server.settimeout(0.2)
    port = server.getsockname()[1]
    accepted: list = []
    done = threading.Event()

    def accept() -> None:
        while not done.is_set():
            try:
                accepted.append(server.accept())
            except OSError:
                pass

    watcher = threading.Thread(target=accept)
    watcher.start()
    try:
        result = box.run(f"echo hello > /dev/tcp/127.0.0.1/{port} && echo CONNECTED; "
                         f"python3 -c 'import socket; socket.create_connection((\"10.0.2.2\", 80), 1)' 2>&1 | tail -1; "
                         "cat /proc/net/dev | tail -n +3 | cut -d: -f1")
    finally:
        time.sleep(0.3)   # a connection that got through would be accepted by now
        done.set()
        watcher.join()
        server.close()
    assert "CONNECTED" not in result.output and accepted == []
    assert result.output.split()[-1] == "lo"   # the only interface
    assert_usable(box)


# -- escapes ------------------------------------------------------------------------------------

def test_no_privileges_inside(box):
    result = box.run("id -u; grep -E '^(CapEff|CapPrm|CapBnd|NoNewPrivs)' /proc/self/status")
    lines = result.output.split()
    assert lines[0] != "0"
    assert dict(zip(lines[1::2], lines[2::2])) == {"CapEff:": "0000000000000000", "CapPrm:": "0000000000000000",
                                                   "CapBnd:": "0000000000000000", "NoNewPrivs:": "1"}


@pytest.mark.parametrize("attempt", [
    "mount -o remount,rw,bind /etc",
    "mount -o remount,rw /usr",
    "mount -t tmpfs none /tmp",
    "unshare -r true",
    "unshare -rm sh -c 'mount -o remount,rw /usr'",
    "touch /etc/icplay-escape",
    "touch /usr/icplay-escape",
    "touch /icplay-escape",
    "cat /etc/shadow",
    "cat /proc/1/root/etc/shadow",
    "ls /proc/1/root/../../host-etc-that-is-not-there/",
    "su -c id root </dev/null",
    "chroot / true",
    "nsenter -t 1 -m true",
])
def test_escape_attempts_fail(box, attempt):
    result = box.run(attempt)
    assert result.exit_code not in (0, None), f"{attempt!r} succeeded: {result.observation}"
    assert not Path("/etc/icplay-escape").exists() and not Path("/usr/icplay-escape").exists()
    assert_usable(box)


def test_remount_then_write_does_not_reach_the_host(box):
    marker = f"icplay-escape-{os.getpid()}"
    box.run(f"mount -o remount,rw,bind /etc; mount -o remount,rw /usr; echo x > /etc/{marker}; echo x > /usr/{marker}")
    assert not (Path("/etc") / marker).exists() and not (Path("/usr") / marker).exists()


def test_setuid_binaries_give_nothing(box):
    found = box.run("find /usr/bin /usr/sbin -perm -4000 -type f 2>/dev/null | head -5").output.split()
    if not found:
        pytest.skip("no setuid binary on this host to try")
    for binary in found:
        result = box.run(f"{binary} --help >/dev/null 2>&1; cat /proc/self/status | grep -c '^CapEff:.0000000000000000'; "
                         f"id -u")
        assert result.output.split()[-1] != "0"


def test_icplay_environment_is_nowhere_inside(box):
    assert os.environ["OPENAI_API_KEY"] == SECRET
    result = box.run("env; for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do tr '\\0' '\\n' < $f; done 2>/dev/null; "
                     "grep -rs OPENAI /etc /root /tmp /run; echo done")
    assert SECRET not in result.output and "OPENAI" not in result.output
    assert result.output.strip().endswith("done")
    env = dict(line.split("=", 1) for line in box.run("env").output.splitlines() if "=" in line)
    assert set(env) <= {"PATH", "HOME", "LANG", "TERM", "USER", "LOGNAME", "SHELL", "PWD", "OLDPWD", "SHLVL", "_",
                        "PAGER", "GIT_PAGER", "LC_ALL"}


def test_the_sandbox_has_its_own_minimal_etc(box):
    result = box.run("ls /etc; getent passwd $(id -u); hostname")
    names = set(result.output.split())
    assert "shadow" not in names and "gshadow" not in names and "sudoers" not in names
    assert "icplay:x:1000:1000:icplay:/root:/bin/bash" in result.output
    host_users = {line.split(":")[0] for line in Path("/etc/passwd").read_text().splitlines()} - {"root", "nobody"}
    assert not host_users & set(box.run("cut -d: -f1 /etc/passwd").output.split())


def test_the_action_runs_as_a_dedicated_host_uid_when_icplay_is_root(box):
    if not running_as_root():
        pytest.skip("icplay is not root here: the action has the user's own uid, which is all it can have")
    box.run("sleep 30 &")
    uid = box.host_uid
    assert uid is not None and uid != 0
    assert host_processes_of(uid), "the action's processes must run as the sandbox's host uid"
    # ... which owns nothing of the host's.
    owned = subprocess.run(["find", "/etc", "/usr", "-xdev", "-uid", str(uid), "-print", "-quit"],
                           capture_output=True, text=True).stdout
    assert owned == ""
    # Its files on the host belong to that uid too, not to root.
    box.run("echo x > /testbed/owned.txt")
    assert (box.root / "testbed" / "owned.txt").stat().st_uid == uid


def test_the_scoring_side_door_drops_root_too(box):
    if not running_as_root():
        pytest.skip("icplay is not root here")
    box.run("ln -s /etc/shadow /testbed/peek")
    code, output = box.exec(["cat", "testbed/peek"])
    assert code != 0 and "root:" not in output


# -- a whole episode through the plain REPL ---------------------------------------------------

HOSTILE_TURNS = [
    "python3 -c 'x = [bytearray(16 * 2**20) for _ in range(10**6)]'",
    "dd if=/dev/zero of=/tmp/fill bs=1M count=500; rm -f /tmp/fill",
    "tr '\\0' '\\n' < /proc/1/environ; env",
    "mount -o remount,rw,bind /etc; cat /etc/shadow",
    # A fork bomb left in the background holds the pids limit until an action is stopped
    # (session policy): `exit` ends the shell, and its sandbox with every bomb process.
    ":(){ :|:& };:; sleep 1",
    "exit",
]


def test_a_hostile_episode_is_saved_whole_and_still_scores(tmp_path, bwrap_ready):
    """Through `icplay play --plain` as a user would: every hostile turn is saved, the
    secret in icplay's environment appears nowhere, and the task is still solved after."""
    import json
    import sys

    from icplay.tasks.registry import load_tasks

    task = load_tasks("bash")[0]
    lines = [*HOSTILE_TURNS, task.gold, "submit", ":quit"]
    env = {**os.environ, "OPENAI_API_KEY": SECRET, "ICPLAY_BWRAP_MEMORY": "256m", "ICPLAY_BWRAP_PIDS": "64",
           "ICPLAY_BWRAP_DISK": "64m", "ICPLAY_HOME": str(tmp_path / "home")}
    done = subprocess.run([sys.executable, "-m", "icplay.cli", "play", "bash", "--plain", "--sandbox", "bwrap",
                           "--task", task.id, "--out", str(tmp_path / "out")], input="\n".join(lines) + "\n",
                          capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert "reward: 1.00  (solved)" in done.stdout, done.stdout[-3000:]
    assert SECRET not in done.stdout + done.stderr
    saved = [json.loads(p.read_text()) for p in (tmp_path / "out").rglob("*.json")]
    solved = [t for t in saved if t["task"]["id"] == task.id]
    assert len(solved) == 1
    actions = [turn["action"] for turn in solved[0]["turns"]]
    assert actions[:len(HOSTILE_TURNS) + 1] == [*HOSTILE_TURNS, task.gold]
    assert SECRET not in json.dumps(saved)
    observations = [turn["observation"] for turn in solved[0]["turns"]]
    assert "MemoryError" in observations[0] or "Killed" in observations[0], observations[0]
    assert "No space left" in observations[1] or "File size limit" in observations[1], observations[1]
