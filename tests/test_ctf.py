"""The CTF environment: the flag reward, task marking, and real episodes on Docker and bwrap.

Every bundled task's solution (data/ctf/solutions/, never copied into a sandbox) is run in
a real sandbox and what it prints is submitted: that proves each flag recoverable offline
with the sandbox's tools, not only that the gold string equals itself.
"""

from __future__ import annotations

import pytest

from icplay.ctf.reward import flag_reward
from icplay.tasks.ctf import mark, playable, remote_reason
from icplay.paths import data_dir
from icplay.tasks.model import Task
from icplay.tasks.registry import load_tasks

GOLD = "picoCTF{Mixed_Case 42}"


@pytest.mark.parametrize("submitted, reward", [
    ("picoCTF{Mixed_Case 42}", 1.0),
    ("PICOCTF{MIXED_CASE 42}", 1.0),            # case-insensitive
    ("  picoctf{mixed_case 42}  ", 1.0),        # surrounding blanks are not part of the flag
    ("picoCTF{Mixed_Case", 0.0),                # InterCode's first-word cut would have scored this
    ("picoCTF{Mixed_Case 42} extra", 0.0),      # the whole rest of the line is the flag
    ("picoCTF{Mixed_Case  42}", 0.0),           # inner blanks count
    ("", 0.0),
    (None, 0.0),
])
def test_flag_reward_by_hand(submitted, reward):
    got, breakdown = flag_reward(submitted, GOLD)
    assert got == reward
    assert breakdown["correct"] is (reward == 1.0)


@pytest.mark.parametrize("submitted, strict", [
    ("picoctf{mixed_case 42}", {"solved": True, "reasons": []}),
    ("picoCTF{Mixed_Case", {"solved": False, "reasons": ["reward 0 is below 1.0", "not the flag"]}),
    (None, {"solved": False, "reasons": ["reward 0 is below 1.0",
                                         "no flag submitted (reply `submit <flag>`)"]}),
])
def test_the_strict_verdict_is_the_flag(submitted, strict):
    """CTF's strict verdict: solved iff the flag matches (compared in icplay's process; no
    sandbox is needed to judge, so none is started here)."""
    from icplay.ctf.env import CtfEnv, CtfSandboxes

    env = CtfEnv(CtfSandboxes("bwrap"))
    env.task = Task(id="t", set="s", env="ctf", query="find it", gold=GOLD)
    result = env.submit(submitted)
    assert result.strict == strict and result.solved is strict["solved"]


def test_remote_tasks_are_recognised():
    assert remote_reason("Connect with nc jupiter.challenges.picoctf.org 44566. Source in store.c", None) == \
        "the flag comes from a server (jupiter.challenges.picoctf.org port 44566)"
    assert remote_reason("Connect to jupiter.challenges.picoctf.org 14291.", None) == \
        "the flag comes from a server (jupiter.challenges.picoctf.org port 14291)"
    assert "downloads" in remote_reason("Use the image.", "wget https://example.org/a.img.gz")
    assert remote_reason("Find the flag in 'trace.pcap'", None) is None
    assert remote_reason("What is 0x3D (base 16) in decimal (base 10)?", None) is None


def test_a_task_without_its_files_is_skipped_with_a_reason(tmp_path):
    task = Task(id="7", set="s", env="ctf", query="Find the flag in 'disk.img.gz'.", gold="f")
    marked = mark(task, tmp_path / "7")
    assert marked.extra["skip"] == "its files are not here (disk.img.gz)"
    (tmp_path / "7").mkdir()
    assert "skip" not in mark(task, tmp_path / "7").extra
    kept, skipped = playable([marked, mark(task, tmp_path / "7")])
    assert [t.extra.get("assets") for t in kept] == [str(tmp_path / "7")] and skipped[0][1].startswith("its files")


def test_intercode_ctf_loads_as_is_with_its_assets(shared_intercode):
    tasks = load_tasks("intercode-ctf")
    assert len(tasks) == 100
    by_id = {t.id: t for t in tasks}
    assert by_id["0"].extra["assets"] == str(shared_intercode / "ctf/task_assets/0")
    assert by_id["14"].extra["setup_dropped"].startswith("git clone") and "setup" not in by_id["14"].extra
    kept, skipped = playable(tasks)
    reasons = {t.id: why for t, why in skipped}
    assert reasons["9"] == "needs a remote server: the flag comes from a server (mercury.picoctf.net port 43239)"
    assert reasons["65"] == "its files are not here (dds1-alpine.flag.img.gz)"
    assert by_id["9"].network and not by_id["0"].network
    # knowledge questions need no files and stay in
    assert {"17", "18", "19", "22", "40", "90"} <= {t.id for t in kept}
    assert (len(kept), len(skipped)) == (78, 22)
    kept_all, skipped_all = playable(tasks, include_remote=True)
    assert sorted(t.id for t, _ in skipped_all) == ["65", "70"]


def test_the_bundled_set_is_complete():
    tasks = load_tasks("ctf")
    assert len(tasks) >= 15
    solutions = data_dir() / "ctf" / "solutions"
    for task in tasks:
        assert (solutions / f"{task.id}.sh").is_file(), task.id
        assert task.hardness in ("easy", "medium", "hard") and task.tags
        assert "skip" not in task.extra and task.extra["assets"].endswith(f"ctf/files/{task.id}")
        assert "solution" not in task.extra["assets"]


def _solution(task: Task) -> str:
    return (data_dir() / "ctf" / "solutions" / f"{task.id}.sh").read_text()


@pytest.fixture(params=[pytest.param("docker", marks=pytest.mark.docker),
                        pytest.param("bwrap", marks=pytest.mark.bwrap)])
def ctf_env(request):
    if request.param == "docker":
        from icplay.languages import get
        from icplay.sandbox.images import ensure_image

        get("ctf")   # its spec registers the image
        ensure_image(request.getfixturevalue("docker_client"), "ctf", lambda line: None)
    else:
        request.getfixturevalue("bwrap_ready")
    from icplay.ctf.env import make_ctf_env

    env = make_ctf_env(request.param)
    yield env
    env.close()


def test_every_bundled_flag_is_recovered_offline_by_its_solution(ctf_env):
    tasks = load_tasks("ctf")
    solved = []
    for task in tasks:
        ctf_env.reset(task)
        result = ctf_env.step(_solution(task), )
        lines = result.observation.strip().splitlines()
        submitted = ctf_env.submit(lines[-1] if lines else "")
        assert submitted.reward == 1.0, (task.id, result.observation[-500:])
        assert submitted.strict == {"solved": True, "reasons": []}, task.id
        solved.append(task.id)
    assert len(solved) == len(tasks)


def test_the_shell_starts_in_the_tasks_folder_after_its_setup(ctf_env):
    vault = next(t for t in load_tasks("ctf") if t.id == "vault-binary")
    ctf_env.reset(vault)
    result = ctf_env.step("pwd; ls -A; test -x vault && echo runnable")
    assert result.observation.split("\n")[:3] == ["/ctf/vault-binary", "vault", "runnable"]  # .build/ removed
    # the solver's copy is its own: it can write there
    assert ctf_env.step("echo x > mine.txt && cat mine.txt").observation == "x\n"
    # no solution notes, no task list, and the flag nowhere in plain text
    found = ctf_env.step(f"grep -rIl {vault.gold!r} /ctf /tmp /root /opt /home /etc 2>/dev/null; ls /ctf; "
                         "find /ctf/ /tmp /root /opt /home \\( -name '*.sh' -o -name tasks.json -o -name 'solution*' \\) 2>/dev/null")
    assert not found.info["timed_out"] and "vault-binary" in found.observation.split()
    assert vault.gold not in found.observation
    assert not [line for line in found.observation.splitlines() if line.startswith("/")], found.observation
    # a new shell (the old one exited) starts in the task's folder too
    ctf_env.step("exit")
    again = ctf_env.step("pwd")
    assert again.observation.splitlines()[0] == "/ctf/vault-binary" and again.info["shell_restarted"]


def test_no_network_in_an_episode(ctf_env):
    task = load_tasks("ctf")[0]
    ctf_env.reset(task)
    result = ctf_env.step("python3 -c \"import socket; socket.create_connection(('1.1.1.1', 53), timeout=3)\" "
                          "2>&1 | tail -1")
    assert "Network is unreachable" in result.observation or "unreachable" in result.observation.lower(), \
        result.observation


def test_the_next_episode_sees_only_its_own_task(ctf_env):
    first, second = load_tasks("ctf")[:2]
    ctf_env.reset(first)
    ctf_env.step("echo left-behind > /ctf/note-from-the-first-episode; echo gone > /tmp/leftover")
    ctf_env.reset(second)
    listing = ctf_env.step("ls -A /ctf; ls -A /tmp")
    assert listing.observation.split() == [second.id], listing.observation


def test_icplay_tasks_shows_why_a_task_is_skipped(shared_intercode, capsys):
    from icplay.cli import main

    assert main(["tasks", "intercode-ctf"]) == 0
    out = capsys.readouterr().out
    assert out.count("(skipped by run: ") == 22
    assert "(skipped by run: its files are not here (suspicious.dd.sda1))" in out
    assert out.rstrip().endswith("22 task(s) are skipped by `icplay run` (--include-remote plays those that need "
                                 "a server)")


@pytest.mark.docker
def test_a_container_killed_between_actions_comes_back_with_the_task_files(docker_client):
    from icplay.ctf.env import make_ctf_env
    from icplay.languages import get
    from icplay.sandbox.images import ensure_image

    get("ctf")
    ensure_image(docker_client, "ctf", lambda line: None)
    vault = next(t for t in load_tasks("ctf") if t.id == "vault-binary")
    env = make_ctf_env("docker")
    try:
        env.reset(vault)
        assert env.step("echo mine > mine.txt; ls").observation.split() == ["mine.txt", "vault"]
        old = env.sandbox.container.id
        docker_client.api.kill(old)
        # the next action runs in a new container that has the task's files (as at the start)
        # and starts in the task's folder, before the action runs
        result = env.step("pwd; ls")
        assert env.sandbox.container.id != old and result.info["sandbox_replaced"], result.info
        assert result.observation.split() == ["/ctf/vault-binary", "vault"], result.observation
        assert env.step("test -x vault && echo runnable").observation == "runnable\n"
    finally:
        env.close()
