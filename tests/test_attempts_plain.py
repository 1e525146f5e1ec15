"""Annotators and attempts through `icplay play ctf --plain` on a real bwrap sandbox: a wrong
flag, then a retry with the right one, stay two numbered attempts by the named annotator;
report counts the first by default; without an annotator the REPL says so in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from icplay.store import load_trajectory

pytestmark = [pytest.mark.usefixtures("bwrap_ready"), pytest.mark.bwrap]


def icplay(*argv: str, stdin: str = "", home=None, env: dict | None = None) -> subprocess.CompletedProcess:
    environ = {**os.environ, "ICPLAY_HOME": str(home), **(env or {})}
    environ.pop("ICPLAY_ANNOTATOR", None) if "ICPLAY_ANNOTATOR" not in (env or {}) else None
    done = subprocess.run([sys.executable, "-m", "icplay.cli", *argv], input=stdin, capture_output=True, text=True,
                          timeout=300, env=environ)
    assert "Traceback" not in done.stderr, done.stderr
    return done


def test_two_plain_attempts_stay_two_and_report_counts_the_first(tmp_path):
    home, out = tmp_path / "home", tmp_path / "session"
    play = ("play", "ctf", "--plain", "--sandbox", "bwrap", "--task", "hex-dump", "--out", str(out))
    first = icplay(*play, "--annotator", "ada", stdin="submit icplay{wrong}\n", home=home)
    assert first.returncode == 0 and "reward: 0.00" in first.stdout
    assert "no annotator set" not in first.stderr
    second = icplay(*play, stdin="submit ICPLAY{H3X_T0_BYT3S_W1TH_XXD}\n", home=home,
                    env={"ICPLAY_ANNOTATOR": "ada"})
    assert "reward: 1.00" in second.stdout

    kept = sorted((tmp_path / ".attempts" / "session" / "ctf").glob("hex-dump.*.json"))
    assert [p.name for p in kept] == ["hex-dump.1.json"]
    old, new = load_trajectory(kept[0]), load_trajectory(out / "ctf" / "hex-dump.json")
    assert (old.attempt, old.reward, old.annotator) == (1, 0.0, "ada")
    assert (new.attempt, new.reward, new.annotator, new.after_gold_seen) == (2, 1.0, "ada", False)
    assert "user" not in new.policy

    default = json.loads(icplay("report", str(out), "--json", home=home).stdout)
    assert default["attempts"] == "first" and default["runs"][0]["solved"] == 0
    best = json.loads(icplay("report", str(out), "--json", "--attempts", "best", home=home).stdout)
    assert best["runs"][0]["solved"] == 1
    table = icplay("report", str(out), "--no-curve", home=home).stdout
    assert table.splitlines()[0] == "counting: first attempt per task (pass@1)"


def test_without_an_annotator_plain_play_says_so_and_records_none(tmp_path):
    home, out = tmp_path / "home", tmp_path / "anon"
    done = icplay("play", "ctf", "--plain", "--sandbox", "bwrap", "--task", "hex-dump", "--out", str(out),
                  stdin="submit icplay{wrong}\n", home=home)
    notes = [line for line in done.stderr.splitlines() if "no annotator set" in line]
    assert len(notes) == 1
    saved = load_trajectory(out / "ctf" / "hex-dump.json")
    assert saved.annotator is None and "user" not in saved.policy


def test_a_bad_annotator_is_one_sentence(tmp_path):
    done = icplay("play", "ctf", "--plain", "--sandbox", "bwrap", "--task", "hex-dump", "--out", str(tmp_path / "x"),
                  "--annotator", " ", home=tmp_path / "home")
    assert done.returncode != 0 and "--annotator" in done.stderr and "printable" in done.stderr


def test_watch_plain_records_the_supervising_annotator(tmp_path):
    out = tmp_path / "watched"
    done = icplay("watch", "sql", "--plain", "--policy", "gold", "--mode", "auto", "--task", "bookshop-01", "--limit",
                  "1", "--sandbox", "sqlite", "--out", str(out), "--annotator", "ada", home=tmp_path / "home")
    assert done.returncode == 0, done.stderr
    assert "no annotator set" not in done.stderr
    saved = load_trajectory(out / "sql" / "bookshop-01.json")
    assert (saved.annotator, saved.attempt, saved.policy["kind"]) == ("ada", 1, "gold")
    assert saved.turns and all("annotator" not in t.info for t in saved.turns)     # the agent's turns are its own
