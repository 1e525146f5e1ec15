"""``:label good|bad|neutral [NOTE]`` in line mode labels the last turn, at the human's prompt
(``icplay play --plain``) and at the reviewer's (``icplay watch --plain``): saved with its
author and time; a word that is not a label is answered with the usage and changes nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from icplay.tasks.registry import load_tasks

ROOT = Path(__file__).resolve().parents[1]
GOLD = next(t for t in load_tasks("sql") if t.id == "bookshop-01").gold


def plain(home, script, *argv):
    done = subprocess.run([sys.executable, "-m", "icplay.cli", *argv, "--plain"], cwd=ROOT, input=script, text=True,
                          env={**os.environ, "ICPLAY_HOME": str(home)}, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_label_at_the_human_prompt(tmp_path):
    out = plain(tmp_path, f":label good too early\nSELECT 1;\n:label bad  not the answer\n{GOLD};\n:label great\n"
                          ":label neutral\nsubmit\n:quit\n", "play", "sql", "--task", "bookshop-01", "--annotator", "ann")
    assert "no turn to label yet" in out and "(turn 1 labelled bad: not the answer)" in out
    assert ":label good|bad|neutral [NOTE]" in out and "(turn 2 labelled neutral)" in out
    saved = json.loads((tmp_path / "trajectories" / "plain" / "sql" / "bookshop-01.json").read_text())
    first, second = (t["info"]["label"] for t in saved["turns"])
    assert (first["label"], first["note"], first["author"]) == ("bad", "not the answer", "ann") and first["at"] > 0
    assert (second["label"], second["note"]) == ("neutral", None)
    assert saved["reward"] == 1.0


def test_label_at_the_reviewers_prompt(tmp_path):
    out = plain(tmp_path, "\n:label good the right query\n\n", "watch", "sql", "--policy", "gold", "--mode", "confirm",
                "--limit", "1", "--annotator", "rev")
    assert "(turn 1 labelled good: the right query)" in out
    folder = tmp_path / "trajectories"
    (path,) = list(folder.rglob("bookshop-01.json"))
    mark = json.loads(path.read_text())["turns"][0]["info"]["label"]
    assert (mark["label"], mark["note"], mark["author"]) == ("good", "the right query", "rev")
