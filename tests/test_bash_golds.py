"""Every bundled Bash task scores as it must in the real sandboxes.

For each task of data/bash/tasks.json, on bwrap and on Docker: an agent that replays the
gold as its one action and submits scores exactly 1.0; an agent that submits at once
scores below 1.0. The strict verdict agrees with the reward on both. One environment serves all tasks of a sandbox kind (reset per task), so
the Docker run reuses its image and its pool of started containers.
"""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from icplay.languages import make_env
from icplay.paths import data_dir
from icplay.tasks.registry import load_tasks

TASKS = {task.id: task for task in load_tasks("bash")}
TASK_IDS = [record["id"] for record in json.loads((data_dir() / "bash/tasks.json").read_text())]

# Every path's type, mode, mtime and link target, and every file's md5, hashed into one line.
FINGERPRINT = (r"cd {root} && {{ find . -mindepth 1 -printf '%y %m %T@ %p %l\n' | LC_ALL=C sort; "
               r"find . -type f -print0 | LC_ALL=C sort -z | xargs -0 md5sum; }} | md5sum")


def _expected_fingerprint(tmp: str) -> str:
    """The fingerprint of the repository's testbed after setup.sh, made here."""
    testbed = f"{tmp}/testbed"
    shutil.copytree(data_dir() / "bash/testbed", testbed, symlinks=True)
    subprocess.run(["bash", str(data_dir() / "bash/setup.sh"), testbed], check=True, capture_output=True)
    done = subprocess.run(["bash", "-c", FINGERPRINT.format(root=testbed)], check=True, capture_output=True,
                          text=True, env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})
    return done.stdout.strip()


@pytest.fixture(scope="module", params=[pytest.param("bwrap", marks=pytest.mark.bwrap),
                                        pytest.param("docker", marks=pytest.mark.docker)])
def env(request, tmp_path_factory):
    if request.param == "bwrap":
        request.getfixturevalue("bwrap_ready")
    else:
        request.getfixturevalue("bash_image")
    expected = _expected_fingerprint(str(tmp_path_factory.mktemp("testbed-fingerprint")))
    environment = make_env("bash", sandbox=request.param)
    try:
        # The sandbox must hold this checkout's testbed: an image built before the testbed
        # changed would make every gold below fail for the wrong reason.
        environment.reset(TASKS[TASK_IDS[0]])
        seen = environment.step(FINGERPRINT.format(root="/testbed")).observation.strip()
        assert seen == expected, (f"the {request.param} sandbox's /testbed is not data/bash/testbed after "
                                  "setup.sh (a stale image? run: icplay images build bash)")
        yield environment
    finally:
        environment.close()


def _explain(result) -> str:
    b = result.breakdown
    return (f"reward {result.reward}: p1={b.get('p1')} p2={b.get('p2')} p3={b.get('p3')} "
            f"missing={b.get('missing')} extra={b.get('extra')} different={b.get('different_content')} "
            f"cosine={b.get('cosine')} gold exit={b.get('gold_exit_code')}\ngold output:\n{result.gold_output}")


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_replaying_the_gold_scores_one(env, task_id):
    task = TASKS[task_id]
    assert env.reset(task) == task.query
    step = env.step(task.gold)
    assert step.exit_code == 0, step.observation
    result = env.submit()
    assert result.breakdown.get("gold_exit_code") == 0, _explain(result)
    assert result.reward == 1.0, _explain(result)
    assert result.solved
    # the strict verdict agrees with the reward on every gold: its changes, modified files
    # included, are the gold's own
    assert result.strict == {"solved": True, "reasons": []}, (result.strict, _explain(result))


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_doing_nothing_scores_below_one(env, task_id):
    task = TASKS[task_id]
    env.reset(task)
    result = env.submit()
    assert result.breakdown.get("gold_exit_code") == 0, _explain(result)
    assert result.reward < 1.0, _explain(result)
    assert result.strict["solved"] is False
