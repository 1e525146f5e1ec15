"""The import-linter contracts of pyproject.toml hold (layers; only icplay.tui imports
textual), and they do catch a break."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from ci_rules import unavailable

ROOT = Path(__file__).resolve().parents[1]


def lint_imports() -> str:
    found = Path(sys.executable).parent / "lint-imports"
    if not found.exists():
        found = shutil.which("lint-imports")
        if found is None:
            unavailable("import-linter is not installed (pip install -e '.[dev]')")
    return str(found)


def run(tool: str, cwd: Path) -> subprocess.CompletedProcess:
    # cwd first on sys.path, so the icplay of that folder is the one analysed
    return subprocess.run([tool, "--no-cache"], cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={"PYTHONPATH": str(cwd), "PATH": "/usr/bin:/bin"})


def test_contracts_are_kept():
    done = run(lint_imports(), ROOT)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout


@pytest.mark.parametrize("module, line, broken", [
    ("icplay/envs/base.py", "import textual", "Only icplay.tui imports textual"),
    ("icplay/sandbox/base.py", "import icplay.envs", "icplay.sandbox is not allowed to import icplay.envs"),
    ("icplay/formats/intercode.py", "import icplay.rescore",
     "icplay.formats.intercode is not allowed to import icplay.rescore"),
    ("icplay/python/reward.py", "import icplay.envs.base", "icplay.python is not allowed to import icplay.envs"),
])
def test_a_break_is_caught(tmp_path, module, line, broken):
    tool = lint_imports()
    shutil.copytree(ROOT / "icplay", tmp_path / "icplay", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    with open(tmp_path / module, "a") as handle:
        handle.write(f"\n{line}  # a layering mistake\n")
    done = run(tool, tmp_path)
    assert done.returncode != 0
    assert broken in done.stdout.replace("\n", " ") or broken in done.stdout
