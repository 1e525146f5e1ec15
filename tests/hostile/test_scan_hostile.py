"""Hostile probes at the scan's doors: what a solver wrote (actions, outputs) reaches the text
output and the page as text only; a trajectory file built to make the scanners slow or loud
costs neither; a plug-in scanner that raises or fails to load costs no other flag."""

from __future__ import annotations

import json
import time
from importlib.metadata import EntryPoint

from scan_helpers import AGENT_POLICY, SQL_TASKS, sql_episode

import icplay.scan.registry as registry
from icplay.cli import main
from icplay.episode import AGENT, Trajectory, Turn
from icplay.session import Session
from icplay.store import atomic_write_text, trajectory_json

MARKUP = "<img src=\"http://evil.example/x.png\" onerror=\"alert(1)\">"


def test_solver_text_is_text_in_the_listing_and_the_page(tmp_path, capsys):
    action = f"SELECT '{MARKUP}\x1b[2J\x1b]0;owned\x07 icplay' AS x"
    sql_episode(Session("h", root=tmp_path / "runs"), SQL_TASKS["bookshop-01"], [action] * 3)
    page = tmp_path / "scan.html"
    assert main(["scan", str(tmp_path / "runs"), "--html", str(page)]) == 0
    out = capsys.readouterr().out
    assert "touches-scoring" in out and "loop" in out
    assert "\x1b" not in out and "\x07" not in out
    html = page.read_text()
    assert "<img" not in html and "&lt;img src=&quot;http://evil.example/x.png&quot;" in html
    assert "\x1b" not in html


def test_a_file_built_to_be_slow_or_loud_is_neither(tmp_path, capsys):
    """20 000 turns of one action, each printing a megabyte-long 'command not found' line:
    one loop, one run of errors, 20 flags of the missing command each cut to one short line, done
    in seconds (the loop finder was quadratic on a stretch of one action before)."""
    line = "bash: x: command not found " + "A" * 1_000_000
    turns = [Turn(index=i, author=AGENT, action="x", observation=line if i < 20 else "", exit_code=127)
             for i in range(20_000)]
    traj = Trajectory(task={"id": "t", "set": "s", "env": "bash"}, env="bash", sandbox="bwrap", policy=AGENT_POLICY,
                      turns=turns, status="submitted", reward=0.0)
    atomic_write_text(tmp_path / "big.json", trajectory_json(traj))
    started = time.monotonic()
    assert main(["scan", str(tmp_path / "big.json"), "--json"]) == 0
    took = time.monotonic() - started
    data = json.loads(capsys.readouterr().out)
    flags = data["episodes"][0]["flags"]
    assert [f["kind"] for f in flags if f["kind"] != "command-not-found"] == ["error-run", "loop",
                                                                             "submit-without-looking"]
    assert sum(f["kind"] == "command-not-found" for f in flags) == 20
    assert all(len(f["evidence"]) <= 240 and "\n" not in f["evidence"] for f in flags)
    assert took < 60, took        # a guard against quadratic work, not a timing of the scan


def plugin_module(tmp_path, monkeypatch) -> None:
    (tmp_path / "scan_plugins.py").write_text(
        "from icplay.scan.flags import Flag\n"
        "def boom(traj):\n    raise RuntimeError('plug-in bug')\n"
        "def odd(traj):\n    return ['not a flag', Flag('long-episode', None, 'fine')]\n")
    (tmp_path / "scan_broken.py").write_text("raise ImportError('a missing dependency')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    group = registry.ENTRY_POINT_GROUP
    found = {name: EntryPoint(name, value, group) for name, value in
             (("boom", "scan_plugins:boom"), ("odd", "scan_plugins:odd"), ("broken", "scan_broken:nothing"))}
    monkeypatch.setattr(registry, "_plugins", lambda: found)


def test_a_plug_in_that_raises_costs_no_other_flag(tmp_path, capsys, monkeypatch):
    sql_episode(Session("h", root=tmp_path / "runs"), SQL_TASKS["bookshop-01"], ["SELECT count(*) FROM books"] * 3)
    plugin_module(tmp_path, monkeypatch)
    assert main(["scan", str(tmp_path / "runs"), "--scanners", "loop,boom,odd", "--json"]) == 0
    episode = json.loads(capsys.readouterr().out)["episodes"][0]
    assert [(f["kind"], f["scanner"]) for f in episode["flags"]] == [("loop", "loop"), ("long-episode", "odd")]
    assert episode["failures"] == [{"scanner": "boom", "error": "RuntimeError: plug-in bug"}]
    # a plug-in that cannot load: one sentence for the command, left out of the viewer's flags
    assert main(["scan", str(tmp_path / "runs"), "--scanners", "broken"]) != 0
    err = capsys.readouterr().err
    assert "the 'broken' scanner's package failed to load: ImportError: a missing dependency" in err
    assert "Traceback" not in err
    registry._every_scanner.cache_clear()
    try:
        assert "loop" in registry.flag_kinds(load_first(tmp_path / "runs"))
    finally:
        registry._every_scanner.cache_clear()


def load_first(folder):
    from icplay.store import load_trajectory

    return load_trajectory(next(folder.rglob("*.json")))
