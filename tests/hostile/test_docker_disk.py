"""Disk fill on Docker: everything an action can write is bounded. On icplay's image the
root filesystem is read-only and every writable root a tmpfs of the disk limit; a file
is capped at the same size (RLIMIT_FSIZE). One 10 s action used to write 9.4 GB to the
host's disk through the container's writable layer."""

from __future__ import annotations

import pytest
from conftest import RSS_BOUND, peak_rss

pytestmark = pytest.mark.docker

LIMIT = 64 * 1024 * 1024


@pytest.fixture
def small_disk(docker_client, bash_image, image_sandbox):

    box = image_sandbox(docker_client, bash_image, disk_limit=LIMIT, timeout=20)
    box.start()
    yield box
    box.close()


def used(box, path: str) -> int:
    return int(box.run(f"df -B1 --output=used {path} | tail -1").output.split()[0])   # the filesystem's own count


@pytest.mark.parametrize("root", ["/testbed", "/tmp", "/root", "/var/tmp", "/run"])
def test_filling_a_writable_root_stops_at_the_limit(small_disk, root):
    with peak_rss() as rss:
        result = small_disk.run(f"head -c 200M /dev/zero > {root}/fill; echo rc=$?")
    assert any(why in result.output for why in ("No space left on device", "File size limit exceeded")), result.output
    assert "rc=0" not in result.output
    assert used(small_disk, root) <= LIMIT
    assert rss.growth < RSS_BOUND
    assert small_disk.run(f"rm -f {root}/fill; echo ok").output.endswith("ok\n")


def test_many_small_files_and_one_big_file_are_bounded(small_disk):
    small_disk.run("for i in $(seq 200); do head -c 1M /dev/zero > /testbed/f$i || break; done; "
                            "ls /testbed | grep -c '^f'")
    assert used(small_disk, "/testbed") <= LIMIT
    # a file beyond the limit anywhere (also Docker's bind-mounted /etc files) is refused
    big = small_disk.run("head -c 100M /dev/zero > /dev/shm/big; echo rc=$?; "
                         "echo x >> /etc/hosts; echo hosts=$?")
    assert "rc=0" not in big.output and "hosts=0" not in big.output, big.output


def test_nothing_outside_the_roots_is_writable(small_disk):
    result = small_disk.run("for d in / /etc /usr /usr/local/bin /var /var/lib /opt/.. ; do "
                            "touch $d/icplay-probe 2>/dev/null && echo wrote-$d; done; echo checked")
    assert result.output == "checked\n"


def test_disk_fill_through_an_episode_saves_every_turn(play_docker):
    played = play_docker()
    turn = played.act("head -c 3G /dev/zero > /testbed/fill; echo rc=$?; rm -f /testbed/fill")
    assert "rc=0" not in turn.observation
    played.assert_usable()
    played.assert_all_saved()


def test_filling_several_roots_past_the_memory_limit_leaves_a_usable_sandbox(docker_client, bash_image,
                                                                            image_sandbox):
    """tmpfs lives in the container's memory: filling several roots at once reaches the
    memory limit (processes and files together), where the OOM killer strikes. Whatever
    it kills, the next actions run: in the same container, or in a new one with a note."""

    box = image_sandbox(docker_client, bash_image, disk_limit="200m", timeout=20,
                        limits={"mem_limit": "128m", "memswap_limit": "128m"})
    box.start()
    try:
        box.run("head -c 190M /dev/zero > /testbed/a; head -c 190M /dev/zero > /tmp/b; "
                "head -c 190M /dev/zero > /root/c; echo done")
        for _ in range(2):
            after = box.run("rm -f /testbed/a /tmp/b /root/c; echo usable")
        assert after.output.endswith("usable\n"), after.observation
    finally:
        box.close()


def test_the_disk_limit_is_configurable_and_bad_sizes_are_one_line_errors(docker_client, bash_image, monkeypatch,
                                                                          image_sandbox):
    from icplay.sandbox.base import SandboxError

    monkeypatch.setenv("ICPLAY_DISK_LIMIT", "96m")
    assert image_sandbox(docker_client, bash_image).disk_limit == 96 * 1024 * 1024
    monkeypatch.setenv("ICPLAY_DISK_LIMIT", "off")
    assert image_sandbox(docker_client, bash_image).disk_limit is None
    monkeypatch.setenv("ICPLAY_DISK_LIMIT", "lots")
    with pytest.raises(SandboxError, match="not a size: 'lots'"):
        image_sandbox(docker_client, bash_image)
