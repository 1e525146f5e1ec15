"""A command's output through an attached exec is read whole, however quick the command and
however slow the client: the HTTP client reads the response's headers in blocks, and output
the engine sent by then waits in its buffer, below which docker-py hands out the socket
(docker/docker-py#3332; the Bash scoring facts came back cut or empty under load so)."""

from __future__ import annotations

import http.client
import time

import pytest

from icplay.envs.bash_facts import gather
from icplay.sandbox.streams import bounded_exec

pytestmark = pytest.mark.docker

LATE = 0.3   # seconds the client waits before it reads a response: the engine has sent all by then


@pytest.fixture
def container(docker_client, bash_image):
    box = docker_client.containers.run(bash_image, ["sleep", "infinity"], detach=True, labels={"icplay": "1"})
    yield box
    box.remove(force=True)


@pytest.fixture
def slow_client(monkeypatch):
    """Every HTTP response read LATE seconds after its request: a loaded machine, every time."""
    begin = http.client.HTTPResponse.begin

    def late_begin(self):
        time.sleep(LATE)
        return begin(self)

    monkeypatch.setattr(http.client.HTTPResponse, "begin", late_begin)


def test_a_quick_command_s_output_is_read_whole_by_a_slow_client(docker_client, container, slow_client):
    code, output, dropped = bounded_exec(docker_client, container.id, ["printf", "first|second|third"], 1 << 16)
    assert (code, output, dropped) == (0, b"first|second|third", 0)


def test_a_long_output_s_first_block_is_kept(docker_client, container, slow_client):
    argv = ["bash", "-c", "for i in $(seq 1 3000); do printf 'line %d\\n' $i; done"]
    code, output, _ = bounded_exec(docker_client, container.id, argv, 1 << 20)
    lines = output.decode().splitlines()
    assert code == 0 and lines[0] == "line 1" and lines == [f"line {i}" for i in range(1, 3001)]


def test_scoring_facts_are_whole_when_the_client_is_slow(nl2bash_image, slow_client):
    """On InterCode's images the container is faithful: no control shell, the facts come
    through an exec of their own (where the gold ceiling's runs lost them under load)."""
    from icplay.episode import Episode
    from icplay.languages import make_env
    from icplay.tasks.model import Task

    env = make_env("bash", sandbox="docker", image=nl2bash_image)
    try:
        action = "mkdir -p /icplay-probe && echo hi > /icplay-probe/f"
        episode = Episode(env, Task(id="c", set="t", env="bash", query="q", gold=action))
        episode.act(action)
        assert env.sandbox.faithful and env.sandbox.control is None
        facts = gather(env.sandbox)
        assert facts.errors == [] and facts.changes
        assert episode.submit().reward == 1.0
    finally:
        env.close()
