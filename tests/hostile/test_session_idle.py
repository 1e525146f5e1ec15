"""A session left idle longer than any client timeout keeps its shell and its state.

The Docker SDK client is made with a 60 s timeout, and the attached exec socket used to
inherit it: the reader timed out after 60 s of silence and the session took the shell for
dead (a human who thinks for a minute lost the session; an idle gold container returned
empty output). One test waits 75 s for every shell at once: the agent's (Docker, bwrap),
a gold sandbox's, and the control shell that scores.
"""

from __future__ import annotations

import time

import pytest
from conftest import TrajectoryStore, hostile_task, Played

from icplay.sandbox.images import docker_client as connect

IDLE = 75.0   # > the docker client's timeout (60 s), the longest one icplay sets


@pytest.mark.slow
@pytest.mark.docker
@pytest.mark.bwrap
def test_every_shell_survives_a_long_idle(docker_client, bash_image, bwrap_ready, tmp_path, image_sandbox):
    from icplay.envs.bash import BashEnv, BashSandboxes

    assert connect().api.timeout <= IDLE - 10
    sandboxes = BashSandboxes(image_sandbox.kind, spares=0)
    bwrap_sandboxes = BashSandboxes("bwrap", spares=0)
    gold = image_sandbox(docker_client, bash_image, trusted=True)
    envs = [BashEnv(sandboxes, owns_sandboxes=False), BashEnv(bwrap_sandboxes, owns_sandboxes=False)]
    try:
        gold.start()
        played = [Played(env, TrajectoryStore(tmp_path / f"t{i}"), hostile_task(i)) for i, env in enumerate(envs)]
        for p in played:
            assert p.act("X=kept; cd /testbed/docs; echo first").observation == "first\n"
        assert gold.run("(\necho gold-first\n)").output == "gold-first\n"
        time.sleep(IDLE)
        for p in played:
            turn = p.act("echo $X $PWD")
            assert turn.observation == "kept /testbed/docs\n", turn.observation
            assert not turn.info["shell_restarted"]
            p.assert_all_saved()
        # the gold's shell, and the control shells that score (git status through them)
        assert gold.run("(\nls /testbed | head -1\n)").output.strip() != ""
        assert gold.shell.pid is not None and gold.control is not None
        docker_env = envs[0]
        control = docker_env.sandbox.control
        assert control is not None
        code, out = docker_env.sandbox.exec(["git", "status", "--short"])
        assert code == 0 and out == ""
        assert docker_env.sandbox.control is control      # answered, not replaced by docker exec
        result = docker_env.submit()
        assert "gold_exit_code" in result.breakdown
    finally:
        for env in envs:
            env.close()
        gold.close()
        sandboxes.close()
        bwrap_sandboxes.close()
