"""Branching a watched episode at a turn (icplay/review/branch.py, ``icplay branch``): each
continuation replayed in a fresh sandbox through the driver and scored; ``export
preference`` pairs them by outcome, so a human's correction that scored worse is the
rejected side. Real sandboxes: bwrap for Bash, SQLite for SQL."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from branching_helpers import edit, reject, watched_episode
from icplay.formats.export import preference_records
from icplay.languages import make_env
from icplay.review.branch import BranchError, Branching, branch
from icplay.store import load_trajectory
from icplay.tasks.registry import load_tasks

SQL_TASK = next(t for t in load_tasks("sql") if t.id == "bookshop-01")
BASH_TASK = next(t for t in load_tasks("bash") if t.id == "b001")
LOOK_SQL = "SELECT genre FROM books"
LOOK_BASH = "ls /testbed/logs/nginx"


def cli(*args, home):
    return subprocess.run([sys.executable, "-m", "icplay.cli", *args], capture_output=True, text=True, timeout=300,
                          env={"ICPLAY_HOME": str(home), "PATH": "/usr/bin:/bin"})


def branches_of(source, turn, tmp_path, sandbox):
    how = Branching(make_env=lambda: make_env(source.env, sandbox=sandbox), out=tmp_path / "branches")
    return branch(source, turn, 0, how)


def check_pair(source, branches, chosen_kind, rejected_kind):
    """One outcome pair, the right way round, each side named and scored."""
    by_kind = {b.forked_from["branch"]: b for b in branches}
    assert set(by_kind) == {chosen_kind, rejected_kind}
    for b in branches:
        assert b.forked_from["id"] == source.id and b.status == "submitted" and b.reward is not None
        assert b.id != source.id
    pairs = preference_records(branches)
    assert len(pairs) == 1
    pair = pairs[0]
    assert pair["pairing"] == "outcome" and pair["parent"] == source.id
    assert pair["chosen_source"]["branch"] == chosen_kind and pair["rejected_source"]["branch"] == rejected_kind
    assert pair["chosen_reward"] == by_kind[chosen_kind].reward > pair["rejected_reward"] == by_kind[rejected_kind].reward
    assert pair["chosen_strict"] is True and pair["rejected_strict"] is False
    return pair


@pytest.mark.parametrize("helps", [True, False], ids=["correction-helps", "correction-hurts"])
def test_branching_a_watched_sql_episode_pairs_by_outcome(tmp_path, helps):
    wrong = "SELECT title FROM books"
    proposed, corrected = (wrong, SQL_TASK.gold) if helps else (SQL_TASK.gold, "SELECT 1")
    source = watched_episode(SQL_TASK, "sqlite", [LOOK_SQL, proposed, None], [None, edit(corrected, "mine")],
                             tmp_path / "src.json")
    assert [t.kind for t in source.turns] == ["agent", "edited"] and source.status == "submitted"
    branches = branches_of(source, 1, tmp_path, "sqlite")
    for b in branches:     # the prefix is the recording's, the branched turn each branch's own
        assert b.turns[0].action == LOOK_SQL and b.turns[0].author == "agent"
        assert "Poetry" in b.turns[0].observation
    pair = check_pair(source, branches, *(("correction", "proposal") if helps else ("proposal", "correction")))
    assert SQL_TASK.gold in pair["chosen"][0]["content"]
    assert (corrected if not helps else wrong) in pair["rejected"][0]["content"]
    assert pair["prompt"][-1]["role"] == "user" and "Poetry" in pair["prompt"][-1]["content"]
    assert [m["role"] for m in pair["chosen"]] == ["assistant", "user", "assistant"]
    assert pair["chosen"][-1]["content"] == "submit"
    human = "agent-edited-by-human" in pair["chosen_source"]["authors"]
    assert human is helps        # the human's correction is chosen only where it did better


def test_a_rejected_proposal_is_branched_against_the_humans_next_action(tmp_path):
    """After a rejection the correction is the next action, which the human wrote (here an edit
    of the agent's next proposal); the agent's rejected query, run instead, scores 1.0: it is
    chosen over the human's worse one."""
    source = watched_episode(SQL_TASK, "sqlite", [SQL_TASK.gold, LOOK_SQL, None], [reject("no"), edit("SELECT 2")],
                             tmp_path / "src.json")
    assert [t.kind for t in source.turns] == ["rejected", "edited"] and source.reward == 0.0
    branches = branches_of(source, 0, tmp_path, "sqlite")
    pair = check_pair(source, branches, "proposal", "correction")
    assert SQL_TASK.gold in pair["chosen"][0]["content"] and len(pair["chosen"]) == 3
    # the correction side: the human's action in the rejected proposal's place, then the submit
    assert "SELECT 2" in pair["rejected"][0]["content"] and len(pair["rejected"]) == 3
    assert pair["rejected_source"]["authors"] == ["agent", "agent-edited-by-human"]


@pytest.mark.usefixtures("bwrap_ready")
@pytest.mark.parametrize("helps", [True, False], ids=["correction-helps", "correction-hurts"])
def test_branching_a_watched_bash_episode_on_bwrap(tmp_path, helps):
    wrong = "head -1 /testbed/logs/nginx/access.log"
    proposed, corrected = (wrong, BASH_TASK.gold) if helps else (BASH_TASK.gold, wrong)
    source = watched_episode(BASH_TASK, "bwrap", [LOOK_BASH, proposed, None], [None, edit(corrected)],
                             tmp_path / "src.json")
    assert source.turns[1].kind == "edited"
    branches = branches_of(source, 1, tmp_path, "bwrap")
    assert all("access.log" in b.turns[0].observation for b in branches)
    pair = check_pair(source, branches, *(("correction", "proposal") if helps else ("proposal", "correction")))
    assert BASH_TASK.gold in pair["chosen"][0]["content"]


def test_icplay_branch_saves_branches_the_viewer_lists_and_export_pairs(tmp_path):
    source = watched_episode(SQL_TASK, "sqlite", [LOOK_SQL, SQL_TASK.gold, None], [None, edit("SELECT 1")],
                             tmp_path / "src.json")
    home = tmp_path / "home"
    done = cli("branch", str(tmp_path / "src.json"), "--turn", "2", "--sandbox", "sqlite", home=home)
    assert done.returncode == 0, done.stderr
    assert "correction: reward 0.00, not strictly solved" in done.stdout
    assert "proposal: reward 1.00, strictly solved" in done.stdout
    files = sorted((home / "trajectories" / "branches").glob("*.json"))
    assert len(files) == 2 and all(f.name.startswith(f"{source.id}.t2.") for f in files)
    saved = [load_trajectory(f) for f in files]
    assert {s.forked_from["turn"] for s in saved} == {1}
    from icplay.formats.summary import family, scan

    from icplay.formats.summary import default_paths

    rows = scan([tmp_path / "src.json", *default_paths(home)], cache=False)     # what icplay view reads by default
    assert {r.id for r in family(rows, source.id)} == {source.id, *(s.id for s in saved)}
    out = tmp_path / "pairs.jsonl"
    done = cli("export", "preference", str(home / "trajectories" / "branches"), "--out", str(out), home=home)
    assert done.returncode == 0, done.stderr
    (pair,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert pair["chosen_source"]["branch"] == "proposal" and pair["chosen_reward"] == 1.0
    # authorship pairs only behind the flag, marked as such, never where branches decided
    done = cli("export", "preference", str(tmp_path / "src.json"), "--out", str(out), home=home)
    assert done.returncode == 0 and out.read_text() == ""
    done = cli("export", "preference", str(tmp_path / "src.json"), "--by-authorship", "--out", str(out), home=home)
    (pair,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert pair["pairing"] == "authorship" and "not by outcome" in pair["note"] and pair["chosen_reward"] is None
    both = [str(tmp_path / "src.json"), str(home / "trajectories" / "branches")]
    done = cli("export", "preference", *both, "--by-authorship", "--out", str(out), home=home)
    pairs = [json.loads(line) for line in out.read_text().splitlines()]
    assert [p["pairing"] for p in pairs] == ["outcome"]        # the branches' outcome overrules authorship


def test_branch_refuses_bad_requests_in_one_sentence(tmp_path):
    source = watched_episode(SQL_TASK, "sqlite", [SQL_TASK.gold, None], [], tmp_path / "src.json")
    home = tmp_path / "home"
    for args, words in [(["--turn", "3"], "not a turn of this episode"), (["--turn", "1", "--n", "2"], "--model"),
                        (["--turn", "0"], "not a turn")]:
        done = cli("branch", str(tmp_path / "src.json"), "--sandbox", "sqlite", *args, home=home)
        assert done.returncode != 0 and words in done.stderr and "Traceback" not in done.stderr, done.stderr
    # a task the file names but this machine does not have is never rebuilt from the file
    data = json.loads((tmp_path / "src.json").read_text())
    data["task"]["id"] = "planted-task"
    (tmp_path / "planted.json").write_text(json.dumps(data))
    done = cli("branch", str(tmp_path / "planted.json"), "--turn", "1", "--sandbox", "sqlite", home=home)
    assert done.returncode != 0 and "not in this machine's task sets" in done.stderr
    data["task"]["id"], data["task"]["query"] = SQL_TASK.id, "Drop every table."
    (tmp_path / "other.json").write_text(json.dumps(data))
    done = cli("branch", str(tmp_path / "other.json"), "--turn", "1", "--sandbox", "sqlite", home=home)
    assert done.returncode != 0 and "another query" in done.stderr
    with pytest.raises(BranchError):
        branches_of(source, 5, tmp_path, "sqlite")


def test_sampled_continuations_are_played_by_the_model_from_the_prefix(tmp_path):
    """``--n 2 --model``: the real openai client against the fake server plays twice from the
    state before turn 2; it sees the recorded prefix in its prompt, and each sample is scored."""
    sys.path.insert(0, str(Path(__file__).parent / "agents"))
    from fake_openai_server import FakeOpenAIServer, Script, fenced

    source = watched_episode(SQL_TASK, "sqlite", [LOOK_SQL, SQL_TASK.gold, None], [None, edit("SELECT 1")],
                             tmp_path / "src.json")
    replies = [fenced(SQL_TASK.gold), "submit", fenced("SELECT 3"), "submit"]
    home = tmp_path / "home"
    with FakeOpenAIServer(Script(replies)) as server:
        done = subprocess.run([sys.executable, "-m", "icplay.cli", "branch", str(tmp_path / "src.json"), "--turn", "2",
                               "--n", "2", "--model", "scripted", "--base-url", server.url, "--sandbox", "sqlite"],
                              capture_output=True, text=True, timeout=300,
                              env={"ICPLAY_HOME": str(home), "PATH": "/usr/bin:/bin", "OPENAI_API_KEY": "k"})
        requests = list(server.requests)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("sample: ") == 2
    samples = [load_trajectory(f) for f in (home / "trajectories" / "branches").glob("*.sample.*.json")]
    assert sorted(s.reward for s in samples) == [0.0, 1.0]
    assert all(s.turns[0].action == LOOK_SQL and s.policy["model"] == "scripted" for s in samples)
    assert all(s.turns[1].author == "agent" and s.forked_from == {**s.forked_from, "id": source.id, "turn": 1}
               for s in samples)
    assert LOOK_SQL in json.dumps(requests[0]["messages"])            # the prefix is in the model's prompt
    pairs = preference_records([load_trajectory(f) for f in (home / "trajectories" / "branches").glob("*.json")])
    best = [p for p in pairs if p["chosen_source"]["branch"] == "sample"]
    assert best and all(p["chosen_reward"] == 1.0 for p in best)
    assert all(p["rejected_source"]["branch"] != "sample" or p["rejected_reward"] == 0.0 for p in pairs)
