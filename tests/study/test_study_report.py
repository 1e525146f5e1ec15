"""The study report's figures over hand-built trajectories, checked against values computed
by hand in the comments (the statistics themselves: tests/study/test_study_stats.py)."""

from __future__ import annotations

import json

import pytest
from study_report_data import STUDY, Study, agent_folder, annotated, episode

from icplay.study.report import build_report, load_agents, render_text


def test_per_annotator_first_attempts(tmp_path):
    report = build_report(STUDY, annotated(), load_agents([agent_folder(tmp_path)]))
    rows = {r.label: r for r in report.annotators}
    a, b, c = rows["a"], rows["b"], rows["c"]
    # a: first attempts s/1 (1.0), s/2 (0.0), s/3 (0.5): 1 of 3 solved
    assert (a.assigned, a.episodes, a.solved.solved, a.solved.of) == (3, 3, 1, 3)
    # Wilson 1/3: centre (1/3 + 3.8415/6) / (1 + 3.8415/3) = 0.42692; half 1.96 * sqrt(2/27 + 3.8415/36) / 2.28049
    # = 0.36543 -> [0.0615, 0.7923]
    assert (a.solved.low, a.solved.high) == (pytest.approx(0.0615, abs=1e-4), pytest.approx(0.7923, abs=1e-4))
    assert (a.strict.solved, a.strict.of) == (1, 1)                       # only s/1 has a strict verdict
    assert a.median_time_s == 300 and a.median_turns == 3                 # times 2, 5, 10 min; turns 2, 3, 5
    assert (a.attempts, a.after_gold) == (4, 1)
    # b: s/1 1.0, s/3 0.0, s/4 1.0 (its running second attempt is not counted under pass@1)
    assert (b.episodes, b.solved.solved, b.unfinished, b.attempts) == (3, 2, 0, 4)
    assert (b.strict.solved, b.strict.of) == (0, 1)
    assert b.median_time_s == 240                                         # 4, 6, 3 min -> 4
    assert (c.episodes, c.solved.solved, c.median_time_s) == (2, 2, 450)  # 7 and 8 min -> 7.5
    # all annotators together: 5 of 8 first attempts; Wilson: centre (0.625 + 0.24009) / 1.48018 = 0.58445,
    # half 1.96 * sqrt(0.625 * 0.375 / 8 + 3.8415 / 256) / 1.48018 = 0.27871 -> [0.3057, 0.8632]
    every = rows["all annotators"]
    assert (every.kind, every.assigned, every.episodes, every.solved.solved, every.attempts, every.after_gold) \
        == ("humans", 8, 8, 5, 10, 1)
    assert (every.solved.low, every.solved.high) == (pytest.approx(0.3057, abs=1e-4), pytest.approx(0.8632, abs=1e-4))
    assert every.median_time_s == 330                                     # 2 3 4 5 6 7 8 10 min -> 5.5
    assert report.outside == 1


def test_per_task_and_by_turn(tmp_path):
    report = build_report(STUDY, annotated())
    tasks = {r.label: r for r in report.tasks}
    assert [(r.label, r.assigned, r.episodes, r.solved.solved) for r in report.tasks] == [
        ("s/1", 2, 2, 2), ("s/2", 2, 2, 1), ("s/3", 2, 2, 0), ("s/4", 2, 2, 2)]
    assert (tasks["s/2"].attempts, tasks["s/2"].after_gold) == (3, 1)
    # the turn axis: the longest episode, 5 turns. a solved s/1 at turn 2 of 3 episodes
    assert report.max_turns == 5
    a = report.annotators[0]
    assert a.by_turn == pytest.approx([0, 1 / 3, 1 / 3, 1 / 3, 1 / 3])
    # c solved s/2 at turn 3 and s/4 at turn 4
    assert report.annotators[2].by_turn == pytest.approx([0, 0, 0.5, 1, 1])


def test_agreement_by_hand():
    report = build_report(STUDY, annotated())
    kappa, alpha = report.agreement
    # solved per task [yes, no]: s/1 [2,0], s/2 [1,1], s/3 [0,2], s/4 [2,0]
    # P_i = 1, 0, 1, 1 -> P-bar = 3/4; 5 of 8 ratings solved -> Pe = (5/8)^2 + (3/8)^2 = 34/64
    # kappa = (3/4 - 34/64) / (1 - 34/64) = (14/64) / (30/64) = 7/15
    assert kappa.value == pytest.approx(7 / 15)
    assert (kappa.tasks, kappa.ratings) == (4, 8)
    # rewards per task: (1, 1), (0, 1), (0.5, 0), (1, 1); n = 8
    # observed: s/2 gives 2 ordered pairs of 1^2, s/3 2 of 0.5^2 -> Do = (2 + 0.5) / 8
    # expected: values 1 x5, 0 x2, 0.5 x1: ordered unequal pairs 2*(5*2*1 + 5*1*0.25 + 2*1*0.25) = 23.5 over 8*7
    # alpha = 1 - (2.5/8) / (23.5/56) = 1 - 17.5/23.5 = 12/47
    assert alpha.value == pytest.approx(12 / 47)
    assert "chance" in kappa.meaning and "reliable" in alpha.meaning


def test_attempts_best_and_all():
    best = {r.label: r for r in build_report(STUDY, annotated(), attempts="best").annotators}
    assert (best["a"].episodes, best["a"].solved.solved) == (3, 2)      # a's retry of s/2 counts
    every = {r.label: r for r in build_report(STUDY, annotated(), attempts="all").annotators}
    assert (every["a"].episodes, every["a"].solved.solved) == (4, 2)
    assert (every["b"].episodes, every["b"].unfinished) == (3, 1)       # the running attempt: counted, not submitted
    # agreement never counts an annotator twice on a task: with every attempt, the first rates it
    report = build_report(STUDY, annotated(), attempts="all")
    assert report.agreement[0].value == pytest.approx(7 / 15)


def test_humans_against_an_agent(tmp_path):
    report = build_report(STUDY, annotated(), load_agents([agent_folder(tmp_path)]))
    (agent,) = report.agents
    assert (agent.label, agent.episodes, agent.solved.solved, agent.median_time_s) == ("gpt-agent", 4, 2, None)
    (pair,) = report.versus
    # s/1: a, b solved, agent solved -> both 2; s/2: a no, c yes, agent no -> neither 1, only humans 1
    # s/3: a, b no, agent yes -> only agent 2; s/4: b, c yes, agent no -> only humans 2
    assert (pair.tasks, pair.pairs, pair.both, pair.only_humans, pair.only_agent, pair.neither) == (4, 8, 2, 3, 2, 1)


def test_not_computable_says_why():
    one_each = Study("solo", ("s/1", "s/2"), ("a", "b"), {"a": ("s/1",), "b": ("s/2",)})
    report = build_report(one_each, [episode("s/1", "a", 1.0), episode("s/2", "b", 0.0)])
    assert [a.value for a in report.agreement] == [None, None]
    assert report.agreement[0].cell() == "n/a (no task was rated by 2 or more annotators)"
    same = build_report(STUDY, [episode("s/1", "a", 1.0), episode("s/1", "b", 1.0)])
    assert "n/a (every rating is the same" in same.agreement[0].cell()
    assert "n/a (every value is the same" in same.agreement[1].cell()


def test_text_and_json(tmp_path):
    report = build_report(STUDY, annotated(), load_agents([agent_folder(tmp_path)]))
    text = render_text(report)
    assert "counting: first attempt per task (pass@1)" in text
    assert "1/3 33% [6%–79%]" in text                                   # a's solved with its interval
    assert "5/8 63% [31%–86%]" in text                                  # all together: halves round up
    assert "Fleiss' kappa on solved: 0.467" in text and "Krippendorff's alpha (interval) on reward: 0.255" in text
    data = json.loads(json.dumps(report.to_dict()))
    assert data["annotators"][0]["solved"] == {"solved": 1, "of": 3, "low": pytest.approx(0.0615, abs=1e-4),
                                               "high": pytest.approx(0.7923, abs=1e-4), "rate": pytest.approx(1 / 3)}
    assert data["versus"][0]["only_humans"] == 3


def test_an_unreadable_agent_folder_is_named(tmp_path):
    skipped: list = []
    bad = tmp_path / "run-bad"
    bad.mkdir()
    (bad / "t.json").write_text('{"task": 3, "env": "sql", "sandbox": "x"}')
    assert load_agents([bad, tmp_path / "missing"], skipped=skipped) == []
    assert [s.path for s in skipped] == [str(bad / "t.json"), str(tmp_path / "missing")]


def test_an_unnumbered_file_is_its_task_s_latest_attempt():
    # a current file saved before attempts were numbered comes after the kept attempts of its task
    old = episode("s/1", "a", 1.0, attempt=None)
    report = build_report(STUDY, [old, episode("s/1", "a", 0.0, attempt=1)])
    assert (report.annotators[0].episodes, report.annotators[0].solved.solved) == (1, 0)
