"""``icplay serve-env``: an OpenEnv server built on openenv-core's create_app, driven by
openenv-core's own GenericEnvClient over its WebSocket sessions, and over plain HTTP.

Gold episodes of every bundled set score 1.0 both ways, many sessions at once; bad
input is one sentence; the schema describes the action; --max-envs bounds sessions."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import threading
import time

import pytest

pytest.importorskip("openenv.core", reason="openenv-core is not installed (pip install 'icplay[openenv]')")

import requests  # noqa: E402  (openenv-core's dependency)
import uvicorn  # noqa: E402
from openenv.core.generic_client import GenericEnvClient  # noqa: E402
from websockets.asyncio.client import connect as ws_connect  # noqa: E402

from icplay.languages import get  # noqa: E402
from icplay.serve.openenv import make_app  # noqa: E402
from icplay.tasks.registry import load_tasks  # noqa: E402

SESSIONS = 4


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until_up(url: str, process: subprocess.Popen | None = None) -> None:
    """Poll /health until the server answers (a readiness wait, not a timed check)."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise AssertionError(f"the server exited: {process.stdout.read()}")
        try:
            if requests.get(f"{url}/health", timeout=5).status_code == 200:
                return
        except requests.ConnectionError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"{url} did not come up")


class Served:
    """make_app on uvicorn in a thread of this process."""

    def __init__(self, env_name: str, sandbox: str, max_envs: int = SESSIONS + 1):
        self.app = make_app(env_name, sandbox, max_envs=max_envs)
        self.url = f"http://127.0.0.1:{free_port()}"
        port = int(self.url.rsplit(":", 1)[1])
        self.server = uvicorn.Server(uvicorn.Config(self.app, host="127.0.0.1", port=port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        wait_until_up(self.url)

    def close(self) -> None:
        self.server.should_exit = True
        self.thread.join(120)
        assert not self.thread.is_alive()


@pytest.fixture(scope="module", params=[
    ("sql", "sqlite"),
    pytest.param(("bash", "docker"), marks=pytest.mark.docker),
    ("python", "bwrap"),
    ("ctf", "bwrap"),
], ids=lambda p: f"{p[0]}-{p[1]}")
def served(request):
    env_name, sandbox = request.param
    if sandbox == "docker":
        request.getfixturevalue("bash_image")
    elif sandbox == "bwrap":
        request.getfixturevalue("bwrap_ready")
    server = Served(env_name, sandbox)
    yield env_name, server
    server.close()


async def gold_over_websocket(url: str, env_name: str, tasks) -> list[tuple[str, float | None]]:
    """Each task's gold actions in one of SESSIONS WebSocket sessions; (task, reward) of misses."""
    spec = get(env_name)
    missed = []

    async def session(share) -> None:
        async with GenericEnvClient(base_url=url, message_timeout_s=300) as client:
            for task in share:
                first = await client.reset(task=task.id)
                assert first.observation["query"] == task.query and not first.done
                result = None
                for action in spec.gold(task):
                    result = await client.step({"code": action})
                assert result.done
                state = await client.state()
                assert state["task"] == task.key and state["status"] == "submitted"
                if result.reward != 1.0:
                    missed.append((task.key, result.reward))

    await asyncio.gather(*(session(tasks[i::SESSIONS]) for i in range(SESSIONS)))
    return missed


@pytest.mark.slow
def test_every_bundled_gold_scores_one_over_the_websocket_in_many_sessions(served):
    env_name, server = served
    tasks = load_tasks(env_name)
    assert asyncio.run(gold_over_websocket(server.url, env_name, tasks)) == []


@pytest.mark.slow
def test_every_bundled_gold_scores_one_over_http_one_request_an_episode(served):
    env_name, server = served
    spec = get(env_name)
    missed = []
    for task in load_tasks(env_name):
        first, *rest = spec.gold(task)
        reply = requests.post(f"{server.url}/step", json={"action": {"task": task.id, "code": first, "then": rest}},
                              timeout=300)
        assert reply.status_code == 200, reply.text
        body = reply.json()
        assert body["done"] is True and body["observation"]["task"] == task.key
        if body["reward"] != 1.0:
            missed.append((task.key, body["reward"]))
    assert missed == []


def test_schema_reset_state_and_bad_input():
    server = Served("sql", "sqlite", max_envs=2)
    try:
        schema = requests.get(f"{server.url}/schema", timeout=30).json()
        assert schema["action"]["required"] == ["code"] and "then" in schema["action"]["properties"]
        assert "solved" in schema["observation"]["properties"]
        reset = requests.post(f"{server.url}/reset", json={"task": "bookshop-01"}, timeout=60).json()
        assert reset["observation"]["task"] == "sql/bookshop-01" and reset["done"] is False

        async def drive() -> None:
            async with GenericEnvClient(base_url=server.url) as client:
                with pytest.raises(RuntimeError, match="no task 'no-such-task' in this set"):
                    await client.reset(task="no-such-task")
                with pytest.raises(RuntimeError, match="no episode: reset first"):
                    await client.step({"code": "SELECT 1"})
                step = (await client.reset(seed=3), await client.step({"code": "SELEC nonsense"}))[1]
                assert step.done is False and step.reward == 0.0 and step.observation["output"]
                done = await client.step({"code": "submit"})
                assert done.done and done.reward is not None and done.observation["solved"] is False
                with pytest.raises(RuntimeError, match="the episode has ended"):
                    await client.step({"code": "SELECT 1"})
                async with GenericEnvClient(base_url=server.url) as second:
                    assert (await second.reset(task="bookshop-01")).observation["task"] == "sql/bookshop-01"
                    async with ws_connect(server.url.replace("http://", "ws://") + "/ws") as third:
                        refused = json.loads(await third.recv())   # --max-envs 2: a third is refused
                    assert refused["type"] == "error" and refused["data"]["code"] == "CAPACITY_REACHED"
                    assert refused["data"]["max_sessions"] == 2

        asyncio.run(drive())
        no_task = requests.post(f"{server.url}/step", json={"action": {"code": "SELECT 1"}}, timeout=60)
        assert no_task.status_code >= 400
    finally:
        server.close()


def test_the_serve_env_command_serves_sql(tmp_path):
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "icplay.cli", "serve-env", "--env", "sql", "--sandbox", "sqlite",
                                "--port", str(port), "--max-envs", "2"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until_up(url, process)
        task = load_tasks("sql")[0]
        body = requests.post(f"{url}/step", json={"action": {"task": task.id, "code": task.gold, "then": ["submit"]}},
                             timeout=120).json()
        assert (body["done"], body["reward"]) == (True, 1.0)
    finally:
        process.terminate()
        process.wait(60)
    bad = subprocess.run([sys.executable, "-m", "icplay.cli", "serve-env", "--env", "cobol"], capture_output=True,
                         text=True, timeout=300)
    assert bad.returncode != 0 and "no environment 'cobol'" in bad.stderr and "Traceback" not in bad.stderr
