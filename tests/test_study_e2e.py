"""Issue 22's scripted study, end to end through ``--plain`` on the bundled SQL set (SQLite):
3 annotators × 6 tasks × 2 per task, with a retry after a gold reveal, one annotator on
another machine merged in (with a duplicate and a corrupt file there), and a corrupt file in
the study itself.

``scripted_study`` builds it once per module and returns where it is; the figures a report
must give for it are below, computed by hand (``EXPECTED_*``), for the report's tests to
check against (icplay study report, i22-report).

The assignment (seed 1) and what each annotator does, first attempt:

    task            ana          ben      cho (laptop)
    bookshop-01     ✗ then ✓*             ✓
    bookshop-02                  ✓        ✓
    bookshop-03     ✓            ✓
    bookshop-04                  ✗        ✗
    bookshop-05     ✓            ✗
    bookshop-06     ✓                     ✓
    (* attempt 2, after ana revealed the gold of attempt 1)

Rewards are 0 or 1 (a wrong answer is ``SELECT 'no such answer';``, which shares no row with any gold).
Fleiss' kappa on solved (first attempts; 6 tasks × 2 ratings): P̄ = 4/6 (four tasks agree,
two split), p(solved) = 8/12, P_e = (8/12)² + (4/12)² = 5/9, κ = (2/3 − 5/9)/(1 − 5/9) = 0.25.
Krippendorff's alpha on reward (0/1, so nominal = interval): 12 pairable values, 8 ones and
4 zeros; disagreeing ordered pairs 4 (tasks 01 and 05, 2 each): D_o = 4/12,
D_e = 2·8·4/(12·11) = 64/132, α = 1 − D_o/D_e = 1 − 0.6875 = 0.3125.
Wilson 95% intervals (z = 1.96): 3/4 → [0.3006, 0.9544], 2/4 → [0.15, 0.85], 4/4 →
[0.5101, 1.0], 8/12 → [0.3906, 0.8619], 9/12 → [0.4677, 0.9111].
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from study_helpers import WRONG, gold, icplay, new_study, play, status

from icplay.store import load_trajectory
from icplay.study.model import load_study, study_trajectories

NAME = "baseline"
T = {n: f"sql/bookshop-0{n}" for n in range(1, 7)}
EXPECTED_ASSIGNMENTS = {"ana": (T[1], T[6], T[5], T[3]), "ben": (T[4], T[5], T[2], T[3]),
                        "cho": (T[2], T[1], T[4], T[6])}
# (annotator, task) -> the reward of each attempt, in order
EXPECTED_ATTEMPTS = {
    ("ana", T[1]): [0.0, 1.0], ("ana", T[6]): [1.0], ("ana", T[5]): [1.0], ("ana", T[3]): [1.0],
    ("ben", T[4]): [0.0], ("ben", T[5]): [0.0], ("ben", T[2]): [1.0], ("ben", T[3]): [1.0],
    ("cho", T[2]): [1.0], ("cho", T[1]): [1.0], ("cho", T[4]): [0.0], ("cho", T[6]): [1.0],
}
EXPECTED_AFTER_GOLD = {("ana", T[1], 2)}                 # (annotator, task, attempt) marked after a gold reveal
EXPECTED_SOLVED_FIRST = {"ana": (3, 4), "ben": (2, 4), "cho": (3, 4)}       # solved, tasks (pass@1)
EXPECTED_SOLVED_BEST = {"ana": (4, 4), "ben": (2, 4), "cho": (3, 4)}
EXPECTED_TASK_SOLVED_FIRST = {T[1]: (1, 2), T[2]: (2, 2), T[3]: (2, 2), T[4]: (0, 2), T[5]: (1, 2), T[6]: (2, 2)}
EXPECTED_ALL_SOLVED_FIRST = (8, 12)
EXPECTED_FLEISS_KAPPA_SOLVED = 0.25
EXPECTED_KRIPPENDORFF_ALPHA_REWARD = 0.3125
EXPECTED_WILSON_95 = {(3, 4): (0.3006, 0.9544), (2, 4): (0.15, 0.85), (4, 4): (0.5101, 1.0),
                      (8, 12): (0.3906, 0.8619), (9, 12): (0.4677, 0.9111)}
EXPECTED_SKIPPED = 1                                      # the corrupt file in the study (ben's folder)


@dataclass(frozen=True)
class ScriptedStudy:
    home: Path                    # $ICPLAY_HOME of the study lead's machine
    name: str                     # the study's name
    laptop: Path                  # the other machine's $ICPLAY_HOME (cho played there)
    corrupt: Path                 # the corrupt file inside the study
    merge_out: str                # what `icplay study merge` printed (stdout)
    merge_err: str


def answers(annotator: str, retry_first: bool = False) -> list[str]:
    """The lines that play an annotator's queue as EXPECTED_ATTEMPTS says."""
    lines: list[str] = []
    for ref in EXPECTED_ASSIGNMENTS[annotator]:
        for n, reward in enumerate(EXPECTED_ATTEMPTS[(annotator, ref)]):
            if n:
                lines += [":gold", ":retry"]
            lines += [gold(ref) if reward == 1.0 else WRONG, "submit"]
        lines.append("")
    return lines


@pytest.fixture(scope="module")
def scripted_study(tmp_path_factory) -> ScriptedStudy:
    root = tmp_path_factory.mktemp("study")
    home, laptop = root / "home", root / "laptop"
    path = new_study(home, "--gold-reveal", "--retries", "counted", name=NAME)
    assert dict(load_study(NAME, home).assignments) == EXPECTED_ASSIGNMENTS
    # the other machine: the same study file, cho plays there
    (laptop / "studies" / NAME).mkdir(parents=True)
    shutil.copy(path, laptop / "studies" / NAME / "study.toml")
    for who, where in (("ana", home), ("ben", home), ("cho", laptop)):
        done = play(where, who, answers(who), study=NAME)
        assert f"{who}'s queue is done: 4 of 4 tasks" in done.stdout, done.stdout
    other = laptop / "studies" / NAME
    (other / "sessions/cho/sql/corrupt.json").write_text('{"task": ')                   # corrupt, over there
    shutil.copy(home / "studies" / NAME / "sessions/ana" / f"{T[6]}.json", other / "ana-copy.json")   # a duplicate
    corrupt = home / "studies" / NAME / "sessions/ben/sql/corrupt.json"
    corrupt.write_text('{"task": {"set": "sql", "id": "bookshop-04"}, "env": "sql", "sandbox": 3}')
    merged = icplay("study", "merge", NAME, str(other), home=home)
    return ScriptedStudy(home, NAME, laptop, corrupt, merged.stdout, merged.stderr)


def test_the_scripted_study_is_on_record_as_played(scripted_study):
    s = scripted_study
    assert s.merge_out.strip() == ("merged: 4 added, 1 duplicate(s) left out, 0 conflict(s), 1 file(s) skipped, "
                                   "0 not of this study")
    assert "corrupt.json" in s.merge_err and len(s.merge_err.strip().splitlines()) == 1
    study = load_study(s.name, s.home)
    skipped: list = []
    found = list(study_trajectories(study, s.home, skipped))
    assert [p for p, _ in skipped] == [s.corrupt] and "sandbox is a number" in str(skipped[0][1])
    assert len(skipped) == EXPECTED_SKIPPED
    attempts: dict[tuple[str, str], list] = {}
    for t in sorted(found, key=lambda t: t.attempt or 0):
        attempts.setdefault((t.annotator, t.task_key), []).append(t)
        assert t.study == s.name and t.status == "submitted"
    assert {k: [t.reward for t in v] for k, v in attempts.items()} == EXPECTED_ATTEMPTS
    assert {(a, k, t.attempt) for (a, k), v in attempts.items() for t in v if t.after_gold_seen} == EXPECTED_AFTER_GOLD
    assert attempts[("ana", T[1])][0].gold_seen_at is not None

    rows = status(s.home, s.name)
    assert {w: (r["done"], r["left"], r["attempts"]) for w, r in rows.items()} == {
        "ana": (4, 0, 5), "ben": (4, 0, 4), "cho": (4, 0, 4)}
    done = icplay("study", "status", s.name, home=s.home)
    assert "1 file(s) skipped" in done.stderr and str(s.corrupt) in done.stderr
    first = {who: sum(1 for ref in refs if EXPECTED_ATTEMPTS[(who, ref)][0] == 1.0)
             for who, refs in EXPECTED_ASSIGNMENTS.items()}
    assert {w: (n, 4) for w, n in first.items()} == EXPECTED_SOLVED_FIRST
    # merging the same folder again brings nothing new
    again = icplay("study", "merge", s.name, str(s.laptop / "studies" / s.name), home=s.home)
    assert again.stdout.startswith("merged: 0 added, 5 duplicate(s)")
    assert json.loads(icplay("study", "status", s.name, "--json", home=s.home).stdout)["annotators"][2]["done"] == 4
    assert load_trajectory(s.home / "studies" / s.name / "sessions/ana" / f"{T[1]}.json").attempt == 2
