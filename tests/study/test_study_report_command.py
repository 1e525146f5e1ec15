"""``icplay study report`` on a study saved on disk: its file (icplay.study.model), the
annotators' trajectories saved by the real store (which numbers attempts and marks the one
after a gold reveal), a corrupt file among them and an agent run folder. The figures are the
hand-computed ones of test_study_report.py."""

from __future__ import annotations

import argparse
import dataclasses
import json

import pytest
from study_report_data import STUDY, agent_folder, annotated

from icplay.commands import study_report
from icplay.store import TrajectoryStore
from icplay.study.model import Study, StudyRules, save_study, sessions_dir


def report(*argv: str) -> int:
    """``icplay study report ARGV``."""
    parser = argparse.ArgumentParser(prog="icplay study")
    study_report.add_parser(parser.add_subparsers())
    args = parser.parse_args(["report", *argv])
    return args.func(args)


@pytest.fixture
def saved_study(tmp_path, monkeypatch):
    """The hand-built study of study_report_data saved under a fresh $ICPLAY_HOME: attempts
    numbered by the store, a's retry of s/2 after its gold was shown, one corrupt file."""
    home = tmp_path / "home"
    monkeypatch.setenv("ICPLAY_HOME", str(home))
    study = Study(STUDY.name, STUDY.tasks, STUDY.annotators, 2, 7, STUDY.assignments,
                  StudyRules(gold_reveal=True, retries="counted"), "2026-11-26T08:00:00+00:00")
    save_study(study, home)
    for t in annotated():
        t = dataclasses.replace(t, attempt=None, after_gold_seen=False)       # the store numbers and marks them
        if t.annotator == "a" and t.task_key == "s/2" and t.reward == 0.0:
            t.gold_seen_at = 1_764_000_000.0                                    # a saw the gold after a miss
        TrajectoryStore(sessions_dir(study, home) / str(t.annotator)).save(t)
    (sessions_dir(study, home) / "b" / "s" / "broken.json").write_text('{"task": {"id": 1}, "env": 5}')
    return study, tmp_path


def test_report_on_a_saved_study(saved_study, capsys):
    study, tmp_path = saved_study
    page = tmp_path / "out" / "report.html"
    (tmp_path / "out").mkdir()
    assert report(study.name, "--json", "--html", str(page), "--agents", str(agent_folder(tmp_path))) == 0
    out, err = capsys.readouterr()
    data = json.loads(out)
    rows = {r["label"]: r for r in data["annotators"]}
    # a: first attempts s/1 1.0, s/2 0.0, s/3 0.5 -> 1/3; 4 attempts, the retry after the gold
    assert (rows["a"]["episodes"], rows["a"]["solved"]["solved"], rows["a"]["attempts"], rows["a"]["after_gold"]) \
        == (3, 1, 4, 1)
    assert (rows["b"]["solved"]["solved"], rows["c"]["solved"]["solved"]) == (2, 2)
    kappa, alpha = data["agreement"]
    assert kappa["value"] == pytest.approx(7 / 15) and alpha["value"] == pytest.approx(12 / 47)
    assert data["versus"][0]["both"] == 2 and data["versus"][0]["only_humans"] == 3
    assert data["counting"] == "counting: first attempt per task (pass@1)"
    # the corrupt file: named once on stderr with its field, the rest reported
    assert err.count("broken.json") == 1 and "1 file skipped" in err
    assert [s["path"].endswith("broken.json") for s in data["skipped"]] == [True]
    html = page.read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>") and html.count('<svg class="plot"') == 3


def test_report_as_text_with_best_attempts(saved_study, capsys):
    study, _ = saved_study
    assert report(study.name, "--attempts", "best") == 0
    out = capsys.readouterr().out
    assert "counting: best attempt per task · rules: gold reveal on, retries counted, no time limit" in out
    a_row = next(line for line in out.splitlines() if line.startswith("a "))
    assert "2/3 67% [21%–94%]" in a_row                                         # a's retry solved s/2


def test_bad_input_is_one_sentence(saved_study, tmp_path):
    from icplay.process import UserError

    with pytest.raises(UserError, match="no such study file"):
        report("nosuch")
    study, _ = saved_study
    (tmp_path / "a-file").write_text("")
    with pytest.raises(UserError, match="cannot write the report page .*a-file/r.html: "):
        report(study.name, "--html", str(tmp_path / "a-file" / "r.html"))
