"""The Podman sandbox, on real Podman: Docker's sandbox through Podman's API service.

What is Podman's own is tested here (the service icplay starts and stops, the resource
limits, the labels, each language's gold on it); the hostile probes run on it with
``ICPLAY_TEST_SANDBOX=podman`` (tests/hostile/conftest.py, docs/security.md).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from icplay.envs.base import parse_submit
from icplay.languages import get, make_env
from icplay.sandbox.podman import PodmanSandbox, own_ulimits
from icplay.tasks.registry import load_tasks

pytestmark = [pytest.mark.podman, pytest.mark.slow]


@pytest.fixture
def box(podman_client, podman_images):
    sandbox = PodmanSandbox(podman_client, podman_images["bash"], timeout=20)
    sandbox.start()
    yield sandbox
    sandbox.close()


def test_a_podman_container_is_the_docker_sandbox_bounded_hardened_and_offline(box):
    assert box.kind == "podman" and box.bounded and box.recyclable and not box.faithful
    first = box.run("cd /testbed && export MARK=kept")
    second = box.run("echo $MARK $PWD; ip -o link 2>/dev/null | wc -l; cat /sys/class/net/*/operstate 2>/dev/null | sort -u")
    assert first.exit_code == 0 and second.output.startswith("kept /testbed\n")
    assert sorted(line.split(":")[0] for line in box.run("ls /sys/class/net").output.split()) == ["lo"]
    # the root is read-only; the writable roots are sized tmpfs mounts
    assert "Read-only file system" in box.run("touch /usr/probe").output
    assert box.run("df --output=fstype /testbed | tail -1").output.strip() == "tmpfs"
    # the session's shell lacks audit_write (so it cannot ptrace the warden or the control shell)
    caps = int(box.run("grep CapBnd /proc/self/status").output.split()[1], 16)
    assert not caps & (1 << 29)
    assert box.exec(["git", "-C", "/", "status", "--short"]) == (0, "")


@pytest.mark.parametrize("image", ["bash", "debian:bookworm-slim"])
def test_new_namespaces_and_mounts_are_refused_as_docker_refuses_them(podman_client, podman_images, image):
    """Podman's default seccomp profile allows ``unshare`` and namespace flags; icplay's
    narrows it (icplay's images) or applies the faithful one (a task's own image)."""
    sandbox = PodmanSandbox(podman_client, podman_images.get(image, image), timeout=20)
    sandbox.start()
    try:
        assert sandbox.faithful == (image not in podman_images)
        for action in ("unshare --user --map-root-user true", "unshare --mount true", "unshare --net true",
                       "mount -t tmpfs none /mnt"):
            done = sandbox.run(action)
            assert done.exit_code not in (0, None), (action, done.output)
        forked = sandbox.run("(echo child) & wait; echo parent")
        assert forked.output.split() == ["child", "parent"]
    finally:
        sandbox.close()


def test_the_container_gets_this_process_s_limits_never_more(box):
    limits = own_ulimits()
    soft, hard = limits["nofile"]
    assert box.run("ulimit -Sn; ulimit -Hn").output.split() == [str(soft), str(hard)]
    assert box.run("ulimit -Hu").output.strip() == str(limits["nproc"][1])


def test_a_used_container_is_recycled_pristine(box):
    box.run("echo changed > /testbed/new.txt; rm -rf /root/.bashrc; cd /tmp")
    assert box.recycle(), box.last_recycle_note
    after = box.run("ls /testbed/new.txt; test -f /root/.bashrc && echo bashrc-back").output
    assert "No such file" in after and "bashrc-back" in after, after
    assert box.exec(["git", "-C", "/", "status", "--short"]) == (0, "")


def test_its_containers_carry_icplays_labels_and_go_at_close(podman_client, podman_images):
    box = PodmanSandbox(podman_client, podman_images["bash"], timeout=20)
    box.start()
    container = box.container.id
    labels = podman_client.api.inspect_container(container)["Config"]["Labels"]
    assert labels["icplay"] == "1" and labels["icplay.kind"] == "podman"
    box.close()
    assert not podman_client.api.containers(all=True, filters={"id": container})


def _gold_solves(language: str, task_ids: list[str]) -> list[float]:
    spec = get(language)
    tasks = {t.id: t for t in load_tasks(language)}
    env = make_env(language, sandbox="podman")
    rewards = []
    try:
        for task_id in task_ids:
            task = tasks[task_id]
            env.reset(task)
            result = None
            for action in spec.gold(task):
                is_submit, arg = parse_submit(action)
                if is_submit:
                    result = env.submit(arg)
                    break
                env.step(action)
            assert result is not None and result.strict["solved"], (task_id, result)
            rewards.append(result.reward)
    finally:
        env.close()
    return rewards


def test_bash_golds_solve_on_podman(podman_images):
    assert _gold_solves("bash", ["b001", "b040", "b076"]) == [1.0, 1.0, 1.0]


def test_python_golds_solve_on_podman(podman_images):
    assert _gold_solves("python", [t.id for t in load_tasks("python")[:2]]) == [1.0, 1.0]


def test_ctf_golds_solve_on_podman_with_the_task_files_put_in(podman_images):
    assert _gold_solves("ctf", [t.id for t in load_tasks("ctf")[:2]]) == [1.0, 1.0]


def test_icplay_starts_its_own_service_and_stops_it_with_its_containers_at_exit(podman_images):
    """In a process of its own: with no service named, icplay starts one, and at exit
    removes its containers, then stops the service and removes its socket folder."""
    script = textwrap.dedent("""
        import os
        from icplay.sandbox.podman import HOST_ENV, PodmanSandbox
        from icplay.sandbox.registry import image_engine
        os.environ.pop(HOST_ENV, None)
        kind = image_engine("podman")
        box = PodmanSandbox(kind.client(), "icplay-bash:latest")
        box.start()
        service = kind._service
        print(service.process.pid if service else 0, service.folder if service else "-", box.container.id)
        # no close(): the exit hook removes the container, then stops the service
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    pid, folder, container = done.stdout.split()
    if pid == "0":
        pytest.skip("a system Podman service answers: icplay started none")
    assert subprocess.run(["podman", "container", "exists", container]).returncode == 1
    assert subprocess.run(["ps", "-p", pid], capture_output=True).returncode == 1
    assert not os.path.exists(folder)


def test_the_service_stops_when_icplay_is_killed_without_stopping_it(podman_images):
    """SIGKILL leaves no exit hook to run: the service's watch sees icplay gone and stops it."""
    import signal
    import time

    script = textwrap.dedent("""
        import os, sys, time
        from icplay.sandbox.podman import HOST_ENV
        from icplay.sandbox.registry import image_engine
        os.environ.pop(HOST_ENV, None)
        kind = image_engine("podman")
        kind.client()
        service = kind._service
        print(service.process.pid if service else 0, service.folder if service else "-", flush=True)
        time.sleep(600)
    """)
    icplay = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        pid, folder = icplay.stdout.readline().split()
    finally:
        icplay.send_signal(signal.SIGKILL)
        icplay.wait()
    if pid == "0":
        pytest.skip("a system Podman service answers: icplay started none")
    def services() -> list[str]:
        return subprocess.run(["pgrep", "-f", f"podman system service --time=0 unix://{folder}/"],
                              capture_output=True, text=True).stdout.split()

    deadline = time.monotonic() + 30
    while (services() or os.path.exists(folder)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert services() == [] and not os.path.exists(folder)
