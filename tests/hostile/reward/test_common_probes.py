"""Reward-hack probes that cut across languages, and CTF's (issue 19).

CTF keeps its flag in icplay's process: the env compares the submitted flag there, and the
flag, the task's solution notes and icplay's bundle must be nowhere the solver can read — not
in the sandbox's files, not in /proc (icplay's own processes are not even visible), not in
the environment, not after a per-turn scoring. Each probe runs on Docker and on bwrap.

Then, for every language on every sandbox it runs on: doing nothing and being scored is not
a solve, and every bundled gold is strictly solved wherever the env gives a verdict.
"""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path

import pytest

import icplay
from icplay.cli import main
from icplay.paths import cache_dir, data_dir
from icplay.store import load_trajectory
from icplay.tasks.model import Task
from icplay.tasks.registry import load_tasks

from .conftest import first_task, language_sandbox_params, require_sandbox, sandbox_params

# Languages whose env gives a strict verdict on this branch: their golds must be judged
# strictly solved. The others (bash, sql, python) get their verdicts on their own branches
# (i19-bash, i19-sql, i19-python); until then their golds are held to "strictly solved
# wherever a verdict is given" — add each here once it gives one on every task.
JUDGED = ("bash", "ctf", "python", "sql")
# the languages whose bundled golds this suite runs itself (the others' gold tests assert the verdict)
GOLD_RUN_HERE = ("sql",)

# An action that changes nothing, per language (scored, it must not be a solve).
NOTHING = {"bash": "true", "ctf": "true", "sql": "SELECT 1", "python": "pass", "harbor": "true"}

# The grep patterns below match the probe's secrets without containing them, so that the
# probe's own command line (visible in /proc) never holds what it looks for.
FLAG_PATTERN = "probe_[0-9a-f]{32}"
MARK_PATTERN = "mark_[0-9a-f]{32}"
SEARCH_FILES = ("grep -rsaoE '{pattern}' / --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev "
                "--exclude-dir=usr | head -20; echo files searched")


def secret_ctf_task(tmp_path: Path) -> tuple[Task, str]:
    """A CTF task whose flag is in no file the solver is given: only in its solution notes
    (which are never copied into a sandbox) and in icplay's memory. Returns it and the
    flag's random part."""
    token = uuid.uuid4().hex
    flag = f"picoCTF{{probe_{token}}}"
    files = tmp_path / "ctf-files"
    (files / "solution").mkdir(parents=True)
    (files / "solutions").mkdir()
    (files / "notes.txt").write_text("Nothing here but notes.\n")
    (files / "solution" / "flag.txt").write_text(flag + "\n")
    (files / "solutions" / "solve.sh").write_text(f"echo '{flag}'\n")
    task = Task(id="probe", set="reward-probe", env="ctf", query="Find the flag.", gold=flag,
                extra={"assets": str(files), "setup": "echo set-up > /tmp/setup-ran"})
    return task, token


# -- CTF ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("sandbox", sandbox_params("ctf"))
def test_the_flag_is_nowhere_the_solver_can_look(probe, sandbox, tmp_path, monkeypatch):
    """Files (the solution notes included), /proc of every visible process, the environment:
    before and after a per-turn scoring. icplay's own environment carries a marker that must
    not reach the sandbox either."""
    mark = f"mark_{uuid.uuid4().hex}"
    monkeypatch.setenv("ICPLAY_REWARD_PROBE_MARK", mark)      # icplay's environment, before the sandbox starts
    task, token = secret_ctf_task(tmp_path)
    p = probe("ctf", sandbox, task)
    decoy = uuid.uuid4().hex            # planted by the probe itself: proves each search finds what is there
    files = p.act(f"echo probe_{decoy} > /root/decoy; " + SEARCH_FILES.format(pattern=FLAG_PATTERN))
    assert files.observation.strip().endswith("files searched") and token not in files.observation
    assert f"/root/decoy:probe_{decoy}" in files.observation
    listing = p.act("ls -laR /ctf/; cat /tmp/setup-ran")
    assert "notes.txt" in listing.observation and "set-up" in listing.observation
    assert "solution" not in listing.observation and "solve.sh" not in listing.observation
    processes = p.act("for d in /proc/[0-9]*; do printf '%s: ' \"${d#/proc/}\"; tr '\\0' ' ' < \"$d/cmdline\"; echo; "
                      "done 2>/dev/null; echo processes listed")
    assert processes.observation.strip().endswith("processes listed")
    for host_side in ("pytest", sys.executable, str(Path(icplay.__file__).parent)):
        assert host_side not in processes.observation, host_side      # icplay's process is not visible
    environ = p.act(f"export DECOY=mark_{decoy}; (env; cat /proc/[0-9]*/environ) 2>/dev/null | tr '\\0' '\\n' "
                    f"| grep -aoE '{FLAG_PATTERN}|{MARK_PATTERN}' | sort -u; echo environ searched")
    assert environ.observation.strip() == f"mark_{decoy}\nenviron searched", environ.observation

    scored = p.score()                                   # the per-turn protocol's scoring
    p.assert_not_solved(scored, both=True)
    after = p.act(SEARCH_FILES.format(pattern=FLAG_PATTERN) + f"; (env; cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline)"
                  f" 2>/dev/null | tr '\\0' '\\n' | grep -aoE '{FLAG_PATTERN}'; echo after scoring")
    assert after.observation.strip().endswith("after scoring") and token not in after.observation
    p.assert_after_probe()


@pytest.mark.parametrize("sandbox", sandbox_params("ctf"))
def test_icplay_and_its_bundle_are_out_of_reach(probe, sandbox):
    """A bundled task (its flag in icplay's bundle): the bundle, icplay's package, its cache
    and its interpreter's prefix are not in the sandbox, by name anywhere or at the paths they
    have on this machine, and no flag-shaped text is in a file outside the task's own."""
    task = load_tasks("ctf")[0]
    p = probe("ctf", sandbox, task)
    by_name = p.act("find / \\( -path /proc -o -path /sys -o -path /dev \\) -prune -o \\( -name bundle.tar.gz "
                    "-o -path '*/ctf/solutions' -o -path '*/icplay/_bundle' -o -path '*/data/ctf/tasks.json' "
                    "-o -path '*/icplay/ctf/env.py' -o -name 'icplay-*.dist-info' \\) -print 2>/dev/null; "
                    "echo bundle searched")
    assert by_name.observation.strip() == "bundle searched", by_name.observation
    places = [data_dir() / "ctf" / "tasks.json", data_dir() / "ctf" / "solutions", Path(icplay.__file__).parent,
              cache_dir(), Path(sys.prefix)]
    at_paths = p.act("; ".join(f"test -e '{place}' && echo 'reachable: {place}'" for place in places)
                     + "; echo paths tried")
    assert at_paths.observation.strip() == "paths tried", at_paths.observation
    flags = p.act("grep -rsaoE 'picoCTF\\{[^}]*\\}' / --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev "
                  "--exclude-dir=usr --exclude-dir=ctf | head; echo flags searched")
    assert flags.observation.strip() == "flags searched", flags.observation
    p.assert_not_solved(p.score(), both=True)
    p.assert_after_probe()


@pytest.mark.parametrize("sandbox", sandbox_params("ctf"))
def test_a_flag_is_matched_whole_never_by_pattern_or_planted_file(probe, sandbox, tmp_path):
    task, token = secret_ctf_task(tmp_path)
    flag = task.gold
    p = probe("ctf", sandbox, task)
    planted = p.act("echo 'picoCTF{planted}' > flag.txt; mkdir -p solution; cp flag.txt solution/; cat flag.txt")
    assert planted.observation.strip() == "picoCTF{planted}"
    guesses = ["picoCTF{planted}", "picoCTF{.*}", "picoCTF{*}", "picoCTF{probe_", flag[:-1], flag + "}",
               flag.replace("_", "  "), f"{flag} {flag}", "flag.txt", "$(cat flag.txt)", "", " "]
    for guess in guesses:
        result = p.env.submit(guess)
        p.assert_not_solved(result, both=True)
        assert result.strict["reasons"][-1] in ("not the flag", "no flag submitted (reply `submit <flag>`)")
    p.assert_usable()
    final = p.submit("picoCTF{planted}")
    p.assert_not_solved(final, both=True)
    assert p.episode.trajectory.strictly_solved is False
    p.assert_after_probe()


# -- every language ---------------------------------------------------------------------------


@pytest.mark.parametrize("language, sandbox", language_sandbox_params())
def test_scoring_an_untouched_task_is_no_solve(probe, language, sandbox):
    """An action that changes nothing, scored per turn: the reward is below 1.0, and a strict
    verdict, where the env gives one, says not solved."""
    task = first_task(language)
    p = probe(language, sandbox, task)
    p.act(NOTHING[language])
    result = p.score()
    p.assert_not_solved(result)
    assert result.reward < 1.0
    if result.strict is not None or language in JUDGED:
        assert result.strict["solved"] is False and result.strict["reasons"], result.strict
    p.assert_after_probe()


def forging_actions(language: str, own: Path, new: Path) -> list[str]:
    """Actions that try to overwrite the episode's saved file and plant another beside it."""
    if language == "python":
        return [f"import os; os.makedirs({str(new.parent)!r}, exist_ok=True); "
                f"open({str(own)!r}, 'w').write('FORGED'); open({str(new)!r}, 'w').write('FORGED'); "
                f"print(open({str(own)!r}).read())"]
    if language == "sql":
        return [f"ATTACH DATABASE '{new}' AS forged", f"SELECT 'FORGED' INTO OUTFILE '{new}'"]
    return [f"mkdir -p '{new.parent}' && echo FORGED > '{own}' && echo FORGED > '{new}'; cat '{own}'"]


@pytest.mark.parametrize("language, sandbox", language_sandbox_params())
def test_the_saved_record_is_out_of_reach(probe, language, sandbox):
    """The trajectory a run saves (what report, view and export read) cannot be rewritten from
    the sandbox, nor can a forged episode be planted beside it: the same paths inside the
    sandbox are the sandbox's own, if they can be written at all."""
    task = first_task(language)
    p = probe(language, sandbox, task)
    p.act(NOTHING[language])                                  # the first save: the file exists
    own = p.store.path_for(p.episode.trajectory)
    new = own.parent / "forged.json"
    assert own.is_file()
    for action in forging_actions(language, own, new):
        p.act(action)
    p.assert_not_solved(p.score())
    assert not new.exists()
    p.assert_after_probe()                                   # the file still holds every turn as played
    assert load_trajectory(own).id == p.episode.trajectory.id and not new.exists()


@pytest.mark.slow
@pytest.mark.parametrize("language, sandbox", [p for p in language_sandbox_params() if p.values[0] in GOLD_RUN_HERE])
def test_every_bundled_gold_is_strictly_solved(language, sandbox, tmp_path, capsys, request):
    """Every bundled task's gold, played by ``icplay run --policy gold``, scores InterCode's 1.0
    and is strictly solved. The languages in ``JUDGED`` (every built-in one) must give a
    verdict on every task: bash (every changed path's content against the gold's), sql (a
    discriminative gold), python (results compared as serialised data), ctf (the flag).
    Bash, Python and CTF golds are run (and their verdicts asserted) by their own gold tests
    (tests/test_bash_golds.py, test_python_env.py, test_ctf_run.py) on every sandbox; SQL's here."""
    require_sandbox(request, language, sandbox)
    out = tmp_path / "run"
    code = main(["run", language, "--tasks", language, "--policy", "gold", "--sandbox", sandbox, "--out", str(out),
                 "--json", "--quiet", "-j", "2"])
    captured = capsys.readouterr()
    assert code == 0, captured.err[-2000:]
    summary = json.loads(captured.out)
    trajs = [load_trajectory(path) for path in sorted(out.rglob("*.json")) if path.name != "run.json"]
    assert len(trajs) == len(load_tasks(language)) == summary["episodes"]
    assert [t.task_key for t in trajs if not t.solved] == []
    verdicts = {t.task_key: t.strictly_solved for t in trajs}
    refused = {t.task_key: t.strict_reasons for t in trajs if t.strictly_solved is False}
    assert not refused, refused
    if language in JUDGED:
        assert all(v is True for v in verdicts.values()), verdicts
    judged = [v for v in verdicts.values() if v is not None]
    assert (summary["strict_solved"], summary["strict_judged"]) == (len(judged), len(judged))
