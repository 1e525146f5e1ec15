"""``icplay study report`` on issue 22's scripted study (tests/test_study_e2e.py: 3 annotators ×
6 tasks × 2 per task played through ``--plain``, a retry after a gold reveal, a machine merged
in, a corrupt file), against the figures computed by hand there, and against a real agent run
(``icplay run --policy gold`` over the same six tasks)."""

from __future__ import annotations

import json
import re

import pytest
from study_helpers import icplay
from test_study_e2e import (EXPECTED_ALL_SOLVED_FIRST, EXPECTED_FLEISS_KAPPA_SOLVED,
                            EXPECTED_KRIPPENDORFF_ALPHA_REWARD, EXPECTED_SOLVED_BEST, EXPECTED_SOLVED_FIRST,
                            EXPECTED_TASK_SOLVED_FIRST, EXPECTED_WILSON_95, T, scripted_study)

__all__ = ["scripted_study"]     # the fixture, built once for this module


@pytest.fixture(scope="module")
def gold_run(scripted_study, tmp_path_factory):
    """An agent run folder: the gold policy over the six bookshop tasks (it solves each)."""
    out = tmp_path_factory.mktemp("agent") / "gold-run"
    icplay("run", "sql", "--tasks", "sql", "--policy", "gold", "--sandbox", "sqlite", "--limit", "6",
           "--out", str(out), "--quiet", home=scripted_study.home)
    return out


def report_json(s, *options: str) -> tuple[dict, str]:
    done = icplay("study", "report", s.name, "--json", *options, home=s.home)
    return json.loads(done.stdout), done.stderr


def interval(rate: dict) -> tuple:
    return rate["low"], rate["high"]


def test_the_report_gives_the_hand_computed_figures(scripted_study, gold_run, tmp_path):
    s = scripted_study
    page = tmp_path / "report.html"
    data, err = report_json(s, "--agents", str(gold_run), "--html", str(page))
    rows = {r["label"]: r for r in data["annotators"]}
    assert {w: (rows[w]["solved"]["solved"], rows[w]["episodes"]) for w in EXPECTED_SOLVED_FIRST} \
        == EXPECTED_SOLVED_FIRST
    for who, (solved, n) in EXPECTED_SOLVED_FIRST.items():
        assert interval(rows[who]["solved"]) == pytest.approx(EXPECTED_WILSON_95[(solved, n)], abs=1e-4)
    everyone = rows["all annotators"]
    assert (everyone["solved"]["solved"], everyone["episodes"]) == EXPECTED_ALL_SOLVED_FIRST
    assert interval(everyone["solved"]) == pytest.approx(EXPECTED_WILSON_95[EXPECTED_ALL_SOLVED_FIRST], abs=1e-4)
    # every attempt made, and the one after a gold reveal: ana's second try of bookshop-01
    assert {w: (rows[w]["attempts"], rows[w]["after_gold"]) for w in ("ana", "ben", "cho")} \
        == {"ana": (5, 1), "ben": (4, 0), "cho": (4, 0)}
    # the strict verdict: every episode judged; the golds pass it, the wrong answers do not
    assert all(r["strict"]["of"] == r["episodes"] and r["strict"]["solved"] == r["solved"]["solved"]
               for r in data["annotators"])
    tasks = {r["label"]: (r["solved"]["solved"], r["episodes"]) for r in data["tasks"]}
    assert tasks == EXPECTED_TASK_SOLVED_FIRST
    kappa, alpha = data["agreement"]
    assert kappa["value"] == pytest.approx(EXPECTED_FLEISS_KAPPA_SOLVED)
    assert alpha["value"] == pytest.approx(EXPECTED_KRIPPENDORFF_ALPHA_REWARD)
    assert (kappa["tasks"], kappa["ratings"]) == (6, 12)
    # the gold agent solves all six: the 8 solved ratings are "both", the 4 missed "only the agent"
    (agent,) = data["agents"]
    assert (agent["episodes"], agent["solved"]["solved"]) == (6, 6)
    assert {k: data["versus"][0][k] for k in ("tasks", "pairs", "both", "only_humans", "only_agent", "neither")} \
        == {"tasks": 6, "pairs": 12, "both": 8, "only_humans": 0, "only_agent": 4, "neither": 0}
    # the corrupt file in ben's folder: named once, the rest reported
    assert [x["path"] for x in data["skipped"]] == [str(s.corrupt)]
    assert err.count("corrupt.json") == 1
    html = page.read_text(encoding="utf-8")
    shown = f"<td>{kappa['value']:.3f}</td>", f"<td>{alpha['value']:.3f}</td>"      # 0.250, 0.3125 to 3 places
    assert html.count('<svg class="plot"') == 3 and all(cell in html for cell in shown)


def test_best_attempts_count_the_retry_after_the_gold(scripted_study):
    s = scripted_study
    data, _ = report_json(s, "--attempts", "best")
    rows = {r["label"]: r for r in data["annotators"]}
    assert {w: (rows[w]["solved"]["solved"], rows[w]["episodes"]) for w in EXPECTED_SOLVED_BEST} \
        == EXPECTED_SOLVED_BEST
    assert interval(rows["ana"]["solved"]) == pytest.approx(EXPECTED_WILSON_95[(4, 4)], abs=1e-4)
    assert interval(rows["all annotators"]["solved"]) == pytest.approx(EXPECTED_WILSON_95[(9, 12)], abs=1e-4)
    # agreement still rates each task by each annotator once, with the counted (best) attempt:
    # bookshop-01 now agrees (ana 1, cho 1): P = 5/6, 9 of 12 solved -> Pe = (9/12)^2 + (3/12)^2 = 5/8,
    # kappa = (5/6 - 5/8) / (3/8) = 5/9
    assert data["agreement"][0]["value"] == pytest.approx(5 / 9)
    assert data["tasks"][0]["label"] == T[1] and data["tasks"][0]["after_gold"] == 1


def test_the_text_report(scripted_study):
    s = scripted_study
    done = icplay("study", "report", s.name, home=s.home)
    out = done.stdout
    assert out.startswith("study baseline · counting: first attempt per task (pass@1) · rules: gold reveal on, "
                          "retries counted")
    assert "Fleiss' kappa on solved: 0.250" in out
    assert re.search(r"Krippendorff's alpha \(interval\) on reward: 0\.31[23] ", out)     # 0.3125, rounded either way
    assert "1 file skipped" in done.stderr
