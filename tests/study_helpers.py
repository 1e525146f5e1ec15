"""Running ``icplay`` for the study tests: a study made on the command line, an annotator's
queue played through ``play --study --plain`` from a script of lines."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from icplay.tasks.registry import load_tasks

ROOT = Path(__file__).resolve().parents[1]
SQL = {t.id: t for t in load_tasks("sql")}
SIX = [f"sql/bookshop-0{i}" for i in range(1, 7)]
WRONG = "SELECT 'no such answer';"   # shares no row with any of the six golds


def gold(ref: str) -> str:
    """The gold query of a bundled SQL task, as one line ending with ';'."""
    text = " ".join(SQL[ref.partition("/")[2]].gold.split())
    return text if text.endswith(";") else text + ";"


def icplay(*argv: str, home: Path, stdin: str = "", check: bool = True) -> subprocess.CompletedProcess:
    environ = {**os.environ, "ICPLAY_HOME": str(home)}
    environ.pop("ICPLAY_ANNOTATOR", None)
    done = subprocess.run([sys.executable, "-m", "icplay.cli", *argv], input=stdin, capture_output=True, text=True,
                          timeout=300, env=environ, cwd=ROOT)
    assert "Traceback" not in done.stderr, done.stderr
    if check:
        assert done.returncode == 0, f"{argv}: {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done


def new_study(home: Path, *options: str, name: str = "pilot", seed: int = 1) -> Path:
    icplay("study", "new", name, "--tasks", *SIX, "--annotators", "ana,ben,cho", "--per-task", "2",
           "--seed", str(seed), *options, home=home)
    return home / "studies" / name / "study.toml"


def play(home: Path, annotator: str, lines: list[str], *options: str, study: str = "pilot",
         check: bool = True) -> subprocess.CompletedProcess:
    return icplay("play", "--study", study, "--annotator", annotator, "--plain", "--sandbox", "sqlite", *options,
                  home=home, stdin="".join(line + "\n" for line in lines), check=check)


def status(home: Path, study: str = "pilot") -> dict:
    return {row["annotator"]: row for row in json.loads(icplay("study", "status", study, "--json",
                                                               home=home).stdout)["annotators"]}
