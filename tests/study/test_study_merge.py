"""``icplay study merge``: trajectories from other machines join the study once each; a
conflict (same id, other content) is listed and nothing is overwritten; a corrupt file is
named and counted and the rest goes on."""

from __future__ import annotations

import json
import shutil

from study_helpers import icplay

from icplay.episode import Trajectory
from icplay.store import save_trajectory
from icplay.study.assign import assign
from icplay.study.merge import merge
from icplay.study.model import Study, StudyRules, load_study, save_study, study_dir
from icplay.study.queue import Queue
from icplay.study.status import study_status

SIX = tuple(f"sql/bookshop-0{i}" for i in range(1, 7))
WHO = ("ana", "ben", "cho")


def traj(who: str, ref: str, reward: float, study: str | None = "pilot", **kw) -> Trajectory:
    set_name, task_id = ref.split("/")
    return Trajectory(task={"set": set_name, "id": task_id, "env": "sql"}, env="sql", sandbox="sqlite",
                      annotator=who, attempt=1, study=study, status="submitted", reward=reward, time_worked=30.0, **kw)


def setup(tmp_path):
    home = tmp_path / "home"
    save_study(Study("pilot", SIX, WHO, 2, 1, assign(SIX, WHO, 2, 1), StudyRules(), "2026-01-01"), home)
    study = load_study("pilot", home)
    ana, ben = study.assigned_to("ana"), study.assigned_to("ben")
    mine = traj("ana", ana[0], 1.0)
    save_trajectory(mine, study_dir("pilot", home) / "sessions/ana" / f"{ana[0]}.json")
    other = tmp_path / "laptop"
    other.mkdir()
    shutil.copy(study_dir("pilot", home) / "sessions/ana" / f"{ana[0]}.json", other / "copy.json")
    changed = traj("ana", ana[0], 0.0)
    changed.id = mine.id
    save_trajectory(changed, other / "sessions/ana/sql/changed.json")
    new = traj("ben", ben[0], 1.0)
    save_trajectory(new, other / "sessions/ben/sql" / f"{ben[0].split('/')[1]}.json")
    save_trajectory(traj("ben", ben[1], 0.0, study="another"), other / "x/another.json")
    save_trajectory(traj("zed", ben[1], 0.0), other / "x/zed.json")
    (other / "sessions/ben/sql/broken.json").write_text('{"task": {"id": 1, "set": "sql"}, "env": "sql", "sand')
    (other / "sessions/ben/.locks/sql").mkdir(parents=True)
    (other / "sessions/ben/.locks/sql/x.json.lock").write_text("12")
    return home, study, other, mine, new


def test_merge_adds_once_lists_conflicts_and_counts_corrupt_files(tmp_path):
    home, study, other, mine, new = setup(tmp_path)
    before = (study_dir("pilot", home) / "sessions/ana" / f"{study.assigned_to('ana')[0]}.json").read_bytes()
    result = merge(study, [other], home)
    assert [p.name for p in result.added] == [f"{study.assigned_to('ben')[0].split('/')[1]}.{new.id}.json"]
    assert [p.name for p in result.duplicates] == ["copy.json"]
    assert [(a.name, b.name) for a, b in result.conflicts] == [("changed.json", f"{mine.task['id']}.json")]
    assert len(result.skipped) == 1 and "broken.json" in result.skipped[0][1]
    assert sorted(why for _, why in result.foreign) == ["annotator 'zed' is not one of this study's",
                                                         "made in study 'another'"]
    mine_now = study_dir("pilot", home) / "sessions/ana" / f"{study.assigned_to('ana')[0]}.json"
    assert mine_now.read_bytes() == before                                   # nothing overwritten
    added = result.added[0]
    assert json.loads(added.read_text()) == json.loads(
        (other / "sessions/ben/sql" / f"{study.assigned_to('ben')[0].split('/')[1]}.json").read_text())
    ben = Queue(study, "ben", home)
    assert ben.done == 1 and ben.entry(study.assigned_to("ben")[0]).latest.id == new.id
    rows = {r.annotator: r for r in study_status(study, home)}
    assert (rows["ben"].done, rows["ben"].attempts, rows["ana"].done) == (1, 1, 1)

    again = merge(study, [other], home)                                     # a second merge adds nothing
    assert not again.added and len(again.duplicates) == 2 and len(again.conflicts) == 1 and len(again.skipped) == 1


def test_merge_command_says_each_in_one_line_and_fails_on_a_conflict(tmp_path):
    home, study, other, mine, new = setup(tmp_path)
    done = icplay("study", "merge", "pilot", str(other), str(tmp_path / "nowhere"), home=home, check=False)
    assert done.returncode == 1
    assert done.stdout.strip() == ("merged: 1 added, 1 duplicate(s) left out, 1 conflict(s), 2 file(s) skipped, "
                                   "2 not of this study")
    err = done.stderr.splitlines()
    assert any(line.startswith("icplay: conflict: ") and "changed.json" in line for line in err)
    assert any("broken.json" in line for line in err) and any("nowhere: no such file" in line for line in err)
