"""`icplay run ctf` and `icplay play ctf --plain` end to end: the gold policy on both sets,
a scripted model through the real openai client, and a human in line mode."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from icplay.cli import main
from icplay.store import load_trajectory
from icplay.tasks.registry import load_tasks

sys.path.insert(0, str(Path(__file__).parent / "agents"))
from fake_openai_server import ByTask, FakeOpenAIServer, fenced  # noqa: E402

SANDBOXES = [pytest.param("docker", marks=pytest.mark.docker), pytest.param("bwrap", marks=pytest.mark.bwrap)]


def ready(sandbox: str, request) -> None:
    if sandbox == "docker":
        from icplay.languages import get
        from icplay.sandbox.images import ensure_image

        get("ctf")   # its spec registers the image
        ensure_image(request.getfixturevalue("docker_client"), "ctf", lambda line: None)
    else:
        request.getfixturevalue("bwrap_ready")


def run_cli(capsys, *argv):
    code = main(["run", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_gold_scores_100_percent_on_the_bundled_ctf_set(sandbox, tmp_path, capsys, request):
    ready(sandbox, request)
    code, stdout, stderr = run_cli(capsys, "ctf", "--tasks", "ctf", "--policy", "gold", "--sandbox", sandbox,
                                   "-j", "2", "--out", str(tmp_path), "--json", "--quiet")
    data = json.loads(stdout)
    assert code == 0, stderr
    assert data["episodes"] == len(load_tasks("ctf")) == 19 and data["solved"] == 19, stdout
    assert data["strict_solved"] == data["strict_judged"] == 19, stdout


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_intercode_golds_with_their_files_submit_as_solved(shared_intercode, sandbox, tmp_path, capsys, request):
    ready(sandbox, request)
    code, stdout, stderr = run_cli(capsys, "ctf", "--tasks", "intercode-ctf", "--policy", "gold", "--sandbox",
                                   sandbox, "-j", "2", "--out", str(tmp_path), "--json")
    data = json.loads(stdout)
    assert code == 0, stderr
    assert (data["episodes"], data["solved"]) == (78, 78), stdout
    assert "icplay: skipping 22 task(s) (--include-remote plays those that need a server): 1: needs a remote " \
           "server: its setup downloads its files" in stderr
    # the files were there: every episode's shell started in its task's folder
    saved = {p.stem: load_trajectory(p) for p in (tmp_path / "intercode-ctf").glob("*.json")}
    assert len(saved) == 78 and all(t.reward == 1.0 for t in saved.values())


@pytest.mark.bwrap
def test_a_scripted_model_solves_some_ctf_tasks(bwrap_ready, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("ICPLAY_PRICES", str(tmp_path / "none.json"))
    q = {t.id: t.query for t in load_tasks("ctf")}
    gold = {t.id: t.gold for t in load_tasks("ctf")}
    rules = {
        q["base64-note"]: [fenced("base64 -d note.txt", "bash"), f"submit {gold['base64-note']}"],   # turn 2
        q["hex-dump"]: [fenced("xxd -r -p dump.txt", "bash"), "submit icplay{not_it}"],             # wrong flag
        q["rot13-memo"]: [f"```bash\nsubmit {gold['rot13-memo'].upper()}\n```"],                   # turn 1, any case
    }
    out = tmp_path / "run"
    with FakeOpenAIServer(ByTask(rules)) as server:
        code, stdout, stderr = run_cli(capsys, "ctf", "--tasks", "ctf", "--model", "scripted", "--base-url",
                                       server.url, "--sandbox", "bwrap", "--turns", "3", "--limit", "3",
                                       "--out", str(out), "--protocol", "agent", "--json")
        assert code == 0, stderr
        system = server.requests[0]["messages"][0]["content"]
    data = json.loads(stdout)
    assert (data["episodes"], data["solved"]) == (3, 2)
    trajs = {p.stem: load_trajectory(p) for p in (out / "ctf").glob("*.json")}
    assert trajs["base64-note"].turns[0].observation == \
        "Remember this for later: icplay{b4s3_64_1s_n0t_encrypt10n}\n"
    assert trajs["hex-dump"].reward == 0.0 and trajs["hex-dump"].breakdown["submitted"] == "icplay{not_it}"
    assert trajs["rot13-memo"].reward == 1.0
    assert "submit <flag>" in system and "/ctf/" in system


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_play_plain_a_human_finds_the_flag(sandbox, tmp_path, request):
    ready(sandbox, request)
    lines = "pwd\nxxd -r -p dump.txt\nsubmit icplay{wrong}\nsubmit ICPLAY{H3X_T0_BYT3S_W1TH_XXD}\n"
    done = subprocess.run([sys.executable, "-m", "icplay.cli", "play", "ctf", "--plain", "--sandbox", sandbox,
                           "--task", "hex-dump", "--out", str(tmp_path)], input=lines, capture_output=True,
                          text=True, timeout=300)
    assert "Traceback" not in done.stderr, done.stderr
    out = done.stdout
    assert "icplay:/ctf/hex-dump$ pwd\n/ctf/hex-dump\n" in out
    assert "The flag is icplay{h3x_t0_byt3s_w1th_xxd}" in out
    # the wrong flag ended hex-dump with 0, and --task plays that task only: the right flag typed
    # after it is never read as an action of another task
    assert out.count("reward: 0.00") == 1, out
    assert out.count("=== task ") == 1, out
