"""The viewer's browser names the files it cannot read (issue 22, item 6): the good episodes
are rows, and one notification, when the scan is done, counts and names the others."""

from __future__ import annotations

import json
from pathlib import Path

from icplay.episode import Trajectory, Turn
from icplay.frontend.config import Config
from icplay.tui.screens.view import ViewApp, ViewScreen
from tui_helpers import wait_for


def write_episode(path: Path, task_id: str, **broken) -> None:
    traj = Trajectory(task={"id": task_id, "set": "sql", "env": "sql", "query": "q"}, env="sql", sandbox="sqlite",
                      status="submitted", reward=1.0)
    traj.turns = [Turn(index=0, author="human", action="SELECT 1;", observation="1")]
    data = traj.to_dict()
    data["turns"][0].update(broken)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


async def test_the_browser_shows_the_good_episodes_and_names_the_bad_files(home, tmp_path):
    folder = tmp_path / "run"
    write_episode(folder / "sql" / "a.json", "a")
    write_episode(folder / "sql" / "b.json", "b")
    write_episode(folder / "sql" / "bad.json", "c", reward="1.0")
    (folder / "sql" / "cut.json").write_text('{"task": {"id": "d"')
    app = ViewApp(paths=[folder], home=home, config=Config(history=False))
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, ViewScreen) and not app.screen.reading, 20, "the scan")
        assert sorted(s.task for s in app.screen.all) == ["a", "b"]
        await wait_for(pilot, lambda: any("skipped" in n.message for n in app._notifications), 20, "the note")
        (note,) = [n for n in app._notifications if "skipped" in n.message]
        assert note.title == "Files skipped" and note.severity == "warning"
        assert note.message == (f"2 files skipped: {folder / 'sql' / 'bad.json'} (turns[0].reward is a string, "
                                f"not a number or null); {folder / 'sql' / 'cut.json'} (not JSON or JSONL: Expecting "
                                "',' delimiter at line 1 column 20)")
