"""`icplay export harbor`: Harbor task folders for every bundled language, checked with the
real `harbor` package's linter and by running them on real Docker as Harbor does.

The oracle's semantics: build environment/, run solution/solve.sh, verify (Harbor's
separate verifier: collect hook, artifacts into a fresh container, tests/test.sh), read
/logs/verifier/reward.txt: 1.0; a wrong answer scores less. bench/bench_harbor.py runs the
same on every bundled task.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from ci_rules import unavailable

from icplay.cli import main
from icplay.harbor.export import export_tasks, slug
from icplay.harbor.oracle import check
from icplay.tasks.registry import load_tasks

pytestmark = pytest.mark.docker

ROOT = Path(__file__).resolve().parents[1]
HARBOR = Path(os.environ.get("ICPLAY_HARBOR_BIN", ROOT / ".venv-harbor/bin/harbor"))

# A CI-sized sample: Bash tasks that answer (b001), create files (b048), modify one (b060)
# and delete (b065); SQL over both databases; Python with and without setup code; CTF
# with plain files and with a setup step run at build time.
SAMPLE = {
    "bash": ("b001", "b048", "b060", "b065"),
    "sql": ("bookshop-01", "transit-05"),
    "python": ("py-01", "py-31"),
    "ctf": ("base64-note", "vault-binary"),
}
NO_DOCKER = ("sql", "python", "ctf")    # exported without running anything


def sample_tasks(languages=tuple(SAMPLE)):
    return [task for lang in languages for task in load_tasks(lang) if task.id in SAMPLE[lang]]


@pytest.fixture(scope="module")
def exported(tmp_path_factory, docker_client) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("harbor")
    result = export_tasks(sample_tasks(), out)
    assert not result.skipped
    return {task.id: folder for task, folder in result.written}


@pytest.fixture(scope="module")
def exported_offline(tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("harbor-offline")
    return {task.id: folder for task, folder in export_tasks(sample_tasks(NO_DOCKER), out).written}


def files_under(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file()]


def test_layout_is_harbors(exported_offline):
    for folder in exported_offline.values():
        for name in ("instruction.md", "task.toml", "environment/Dockerfile", "solution/solve.sh",
                     "tests/test.sh", "tests/expected.json"):
            assert (folder / name).is_file(), f"{folder.name}: {name} missing"
        assert os.access(folder / "tests/test.sh", os.X_OK)
        assert os.access(folder / "solution/solve.sh", os.X_OK)
        assert "/logs/verifier/reward.txt" in (folder / "tests/test.sh").read_text()


def test_expected_values_only_in_tests_and_solution(exported_offline):
    """The flag, the gold function, the gold query and the hidden tests are in tests/ or
    solution/, never in environment/ (the agent's image) or the instruction."""
    tasks = {task.id: task for task in sample_tasks(NO_DOCKER)}
    for task_id, folder in exported_offline.items():
        task = tasks[task_id]
        secrets = [task.gold.strip()]
        secrets += [str(t) for t in (task.extra.get("tests") or [])[1:]]   # the first is shown, as icplay shows it
        visible = [folder / "instruction.md", *files_under(folder / "environment")]
        for path in visible:
            data = path.read_bytes()
            for secret in secrets:
                assert secret.encode() not in data, f"{folder.name}: {path.relative_to(folder)} holds an expected value"
                if task.env == "ctf":
                    assert secret.lower().encode() not in data.lower()
        held = b"".join(p.read_bytes() for p in files_under(folder / "tests") + files_under(folder / "solution"))
        assert task.gold.strip().encode() in held or task.env == "sql"


def test_cli_writes_folders_and_refuses_episodes_paths(tmp_path, capsys):
    assert main(["export", "harbor", "--tasks", "ctf", "--out", str(tmp_path / "out")]) == 0
    assert len([p for p in (tmp_path / "out").iterdir() if (p / "task.toml").is_file()]) == len(load_tasks("ctf"))
    assert "Harbor task folder(s) written" in capsys.readouterr().err
    assert main(["export", "harbor", "some/run", "--out", str(tmp_path / "x")]) != 0
    assert "takes task sets, not episodes" in capsys.readouterr().err
    assert main(["export", "harbor", "--tasks", "no-such-set", "--out", str(tmp_path / "x")]) != 0
    assert "no such task set" in capsys.readouterr().err


def harbor_bin() -> Path:
    if not HARBOR.exists():
        unavailable(f"the harbor package is not installed at {HARBOR} (ci/test.sh installs it in .venv-harbor)")
    return HARBOR


def test_harbor_lint_passes_on_the_sample(exported):
    harbor = harbor_bin()
    done = subprocess.run([str(harbor), "lint", *map(str, exported.values())], capture_output=True, text=True,
                          env={**os.environ, "COLUMNS": "200"}, timeout=600)
    assert done.returncode == 0 and not done.stdout.strip(), done.stdout + done.stderr


def test_harbor_lint_finds_a_broken_task(exported, tmp_path):
    """The linter used above does fail: a task.toml with a field of the wrong type."""
    harbor = harbor_bin()
    broken = tmp_path / "broken"
    subprocess.run(["cp", "-r", str(exported["py-01"]), str(broken)], check=True)
    toml = broken / "task.toml"
    toml.write_text(toml.read_text().replace("timeout_sec = 600.0", 'timeout_sec = "soon"', 1))
    done = subprocess.run([str(harbor), "lint", str(broken)], capture_output=True, text=True,
                          env={**os.environ, "COLUMNS": "200"}, timeout=600)
    assert done.returncode != 0 and "invalid-task-config" in done.stdout


@pytest.mark.parametrize("task_id", [t for ids in SAMPLE.values() for t in ids])
def test_oracle_scores_one(exported, task_id):
    verdict = check(exported[task_id])
    assert verdict.mode == "separate"
    assert verdict.reward == 1.0, (verdict.details, verdict.log)


# A wrong answer per language, and the reward it must stay below.
WRONG = {
    "b001": ("echo 12 > /app/answer.txt", 1.0),                               # the wrong count
    "b048": ("touch /testbed/md_files.txt", 1.0),                              # the file, empty
    "bookshop-01": ("echo 'SELECT title FROM books' > /app/answer.sql", 1.0),
    "py-01": ("printf 'def square(n):\\n    return n + n\\n' > /app/solution.py", 1.0),
    "vault-binary": ("echo 'icplay{not_the_flag}' > /app/flag.txt", 0.5),
}


@pytest.mark.parametrize("task_id", sorted(WRONG))
def test_a_wrong_answer_scores_less(exported, task_id):
    action, bound = WRONG[task_id]
    verdict = check(exported[task_id], act=lambda box: box.sh(action))
    assert verdict.reward is not None and verdict.reward < bound, (verdict.details, verdict.log)


@pytest.mark.parametrize("task_id", ["b048", "py-31"])
def test_oracle_scores_one_in_the_agents_own_container(exported, task_id):
    """A harness without separate verifiers runs tests/ where the agent worked: the same reward."""
    verdict = check(exported[task_id], mode="shared")
    assert verdict.reward == 1.0, (verdict.details, verdict.log)


def test_bash_expected_values_are_icplays_gold_run(exported):
    """tests/expected.json holds what icplay's own gold run printed and changed."""
    data = json.loads((exported["b048"] / "tests/expected.json").read_text())
    run = data["gold_runs"][0]
    assert ["??", "testbed/md_files.txt"] in run["changes"]
    assert run["hashes"]["testbed/md_files.txt"]
    assert slug(next(t for t in load_tasks("bash") if t.id == "b048")) == exported["b048"].name


# -- on Podman: the same export and oracle run through Podman's command-line program ------


@pytest.mark.podman
def test_a_task_exported_and_checked_on_podman_scores_one(tmp_path, podman_images):
    """`--sandbox podman`: the Bash gold run (its expected values) and the oracle's build, solve.sh
    and separate verifier all on Podman."""
    b048 = [task for task in sample_tasks(("bash",)) if task.id == "b048"]   # it creates a file
    [(_task, folder)] = export_tasks(b048, tmp_path, sandbox="podman").written
    run = json.loads((folder / "tests/expected.json").read_text())["gold_runs"][0]
    assert ["??", "testbed/md_files.txt"] in run["changes"]
    verdict = check(folder, sandbox="podman")
    assert verdict.mode == "separate"
    assert verdict.reward == 1.0, (verdict.details, verdict.log)
    wrong = check(folder, act=lambda box: box.sh(WRONG["b048"][0]), sandbox="podman")
    assert wrong.reward is not None and wrong.reward < 1.0, (wrong.details, wrong.log)


def test_a_missing_engine_program_is_one_sentence_before_any_export(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))     # no podman (nor anything else) on PATH
    out = tmp_path / "out"
    assert main(["export", "harbor", "--tasks", "ctf", "--out", str(out), "--check", "--sandbox", "podman"]) != 0
    err = capsys.readouterr().err
    assert "the oracle check on podman needs the `podman` command, which is not on PATH" in err
    assert "Traceback" not in err and not out.exists()
    assert main(["export", "harbor", "--tasks", "ctf", "--out", str(out), "--sandbox", "bwrap"]) != 0
    assert "the 'bwrap' sandbox runs no images" in capsys.readouterr().err
