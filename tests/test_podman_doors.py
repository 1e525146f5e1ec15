"""What runs containers besides the shell sandboxes, on Podman: the MariaDB backend, Harbor
tasks (their own images, their verifier through the engine's archive API) and ``--compat
intercode`` (InterCode's containers). Each goes through the sandbox registry's image kind
(``registry.image_engine``), so each runs on Podman as it does on Docker; these tests
drive the real ``podman system service`` icplay starts (tests/conftest.py's
``podman_client``), and under CI=true they fail rather than skip when Podman is missing."""

from __future__ import annotations

from pathlib import Path

import pytest

from icplay.tasks.model import Task

pytestmark = pytest.mark.podman

ROOT = Path(__file__).resolve().parents[1]
HARBOR = ROOT / "tests" / "data" / "harbor"
BOOKSHOP = ROOT / "data" / "sql" / "databases"


def _ours(client, kind: str) -> list[str]:
    """Ids of this process's containers of ``kind`` (their ``icplay.kind`` label) on the engine."""
    import os

    found = client.api.containers(all=True, filters={"label": [f"icplay.kind={kind}", f"icplay.pid={os.getpid()}"]})
    return [c["Id"] for c in found]


# -- MariaDB -------------------------------------------------------------------------------------


@pytest.fixture
def podman_mysql(podman_client):
    """A MariaDB backend of its own on Podman (icplay-sql built in Podman's storage when missing)."""
    from icplay.sandbox.images import ensure_image
    from icplay.sql import make_sql_backend

    ensure_image(podman_client, "sql", lambda line: None)
    backend = make_sql_backend("mysql", engine="podman", timeout=5.0)
    yield backend
    backend.close()


@pytest.mark.mysql
def test_mariadb_runs_in_a_podman_container_and_keeps_episodes_pristine(podman_client, podman_mysql):
    podman_mysql.reset("bookshop", BOOKSHOP)
    assert podman_mysql.container_id in _ours(podman_client, "sql")
    assert podman_mysql.execute("SELECT COUNT(*) FROM authors").rows == [(12,)]
    assert podman_mysql.execute("UPDATE authors SET name = 'x'").error is None
    podman_mysql.execute("COMMIT")
    assert podman_mysql.execute("SELECT COUNT(DISTINCT name) FROM authors").rows == [(1,)]
    assert podman_mysql.gold("SELECT COUNT(DISTINCT name) FROM authors").rows == [(12,)]   # a pristine copy
    podman_mysql.reset("bookshop", BOOKSHOP)
    assert podman_mysql.execute("SELECT COUNT(DISTINCT name) FROM authors").rows == [(12,)]
    container = podman_mysql.container_id
    podman_mysql.close()
    assert container not in _ours(podman_client, "sql")


@pytest.mark.mysql
def test_mariadb_on_podman_refuses_what_the_agent_may_not_do(podman_mysql):
    podman_mysql.reset("bookshop", BOOKSHOP)
    for statement in ("SET GLOBAL max_statement_time = 0", "CREATE DATABASE icplay_probe",
                      "UPDATE transit.stations SET name = 'x'"):
        result = podman_mysql.execute(statement)
        assert result.error is not None and "denied" in result.error.lower(), (statement, result.error)
    assert podman_mysql.execute("SELECT LOAD_FILE('/etc/passwd')").rows == [(None,)]   # no FILE privilege
    slow = podman_mysql.execute("SELECT SLEEP(60)")
    assert slow.timed_out and slow.duration < 30, slow
    assert podman_mysql.execute("SELECT 1").rows == [(1,)]   # the session survives


def test_an_unknown_engine_for_mariadb_is_one_sentence():
    from icplay.sql import SqlBackendError, make_sql_backend

    backend = make_sql_backend("mysql", engine="k8s")
    with pytest.raises(SqlBackendError, match="no sandbox 'k8s'"):
        backend.start()


# -- Harbor ----------------------------------------------------------------------------------------


@pytest.fixture
def harbor_on_podman(podman_client):
    from ci_rules import unavailable
    from icplay.languages import make_env
    from icplay.sandbox.images import image_exists

    if not image_exists(podman_client, "debian:bookworm-slim"):
        unavailable("debian:bookworm-slim is not in Podman's storage (ci/provision-docker.sh copies it there)")
    env = make_env("harbor", sandbox="podman")
    yield env
    env.close()


def test_harbor_tasks_play_to_one_and_to_zero_on_podman(podman_client, harbor_on_podman):
    from icplay.tasks.registry import load_tasks

    tasks = {t.id: t for t in load_tasks(f"harbor:{HARBOR}")}
    for task in tasks.values():
        harbor_on_podman.reset(task)
        assert harbor_on_podman.sandbox.kind == "podman"
        seen = harbor_on_podman.step("ls -d /tests /solution 2>&1; echo done")
        assert "cannot access '/tests'" in seen.observation and "cannot access '/solution'" in seen.observation
        assert harbor_on_podman.step(task.gold).exit_code == 0
        result = harbor_on_podman.submit()
        assert result.reward == 1.0 and result.strict["solved"] is False, result.breakdown
    harbor_on_podman.reset(tasks["count-errors"])
    harbor_on_podman.step("grep -ci error /app/service.log > /app/answer.txt")
    result = harbor_on_podman.submit()
    assert result.reward == 0.0 and "FAIL: expected 3, got '4'" in result.breakdown["verifier_output"]


def test_harbor_on_a_sandbox_without_images_is_refused_in_one_sentence():
    from icplay.languages import make_env
    from icplay.sandbox.base import SandboxError

    with pytest.raises(SandboxError, match="harbor runs on docker or podman, not 'bwrap'"):
        make_env("harbor", sandbox="bwrap")


# -- --compat intercode --------------------------------------------------------------------------------


@pytest.mark.shared
def test_compat_intercode_runs_intercodes_containers_on_podman(podman_client, podman_nl2bash_image):
    from icplay.languages import make_env

    env = make_env("bash", sandbox="podman", image=podman_nl2bash_image, compat="intercode")
    try:
        assert env.sandbox_kind == "podman"
        env.reset(Task(id="t", env="bash", set="compat", query="q", gold="echo hi > /testbed/hi.txt"))
        assert env.step('echo "a b"').observation == "a\n"              # docker-py's shlex split, as InterCode
        assert env.step('echo "unbalanced').observation == "Malformed command"
        assert env.step("cd /testbed").info["cwd"] == "/testbed"
        assert env.step("pwd").observation == "/testbed\n"
        assert env.step("ls /sys/class/net | sort").observation.split() == ["eth0", "lo"]   # the default network
        assert env.agent is not None and env.agent.container.id in _ours(podman_client, "bash")
        env.step("echo hi > /testbed/hi.txt")
        assert env.submit().reward == 1.0
        env.reset(Task(id="t", env="bash", set="compat", query="q", gold="echo hi > /testbed/hi.txt"))
        assert env.submit().reward < 1.0                                # reset by git: the file is gone
    finally:
        env.close()
    assert not _ours(podman_client, "bash")


def test_compat_intercode_on_a_sandbox_without_images_is_refused():
    from icplay.languages import make_env
    from icplay.sandbox.base import SandboxError

    with pytest.raises(SandboxError, match="--compat intercode runs InterCode's containers, on docker or podman"):
        make_env("bash", sandbox="bwrap", image="intercode-nl2bash-fs1", compat="intercode")
