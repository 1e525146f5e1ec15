"""The sandbox registry: built-in kinds, a third party's found by decorator and by entry
point, one-sentence errors, and the capabilities every caller reads instead of probing."""

from __future__ import annotations

import sys
import types
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Callable

import pytest

import icplay.plugins

from icplay.sandbox import registry
from icplay.sandbox.base import Sandbox, SandboxCapabilities, SandboxError
from icplay.sandbox.registry import HostRoot, SandboxRequest, UnknownSandbox, register_sandbox


class EchoKind:
    """A third party's kind: its sandboxes are never started here, only made."""

    name = "echo"
    capabilities = SandboxCapabilities(runs_images=False, recyclable=False, replaces_dead=False)

    def __init__(self) -> None:
        self.requests: list[SandboxRequest] = []

    def available(self) -> bool:
        return True

    def factory(self, request: SandboxRequest) -> Callable[[], Sandbox]:
        self.requests.append(request)
        return lambda: "an echo sandbox"  # type: ignore[return-value,return-value]

    def close(self) -> None:
        pass


@pytest.fixture
def clean_registry(monkeypatch):
    """The registry as it is, restored after the test (a test's kinds do not leak)."""
    monkeypatch.setattr(registry, "_registered", dict(registry._registered))
    return registry


def _request() -> SandboxRequest:
    return SandboxRequest("bash", "icplay-bash:latest", HostRoot(lambda: Path("/nonexistent")))


def test_builtin_kinds_come_first_with_their_declared_capabilities():
    assert registry.names()[:3] == ["docker", "bwrap", "podman"]
    assert registry.capabilities("docker") == SandboxCapabilities(runs_images=True, recyclable=True,
                                                                  replaces_dead=True)
    assert registry.capabilities("podman") == registry.capabilities("docker")
    assert registry.capabilities("bwrap") == SandboxCapabilities(runs_images=False, recyclable=False,
                                                                 replaces_dead=False)
    assert registry.image_kinds() == ["docker", "podman"]


def test_a_decorated_kind_is_found_listed_and_used_by_the_one_factory(clean_registry):
    register_sandbox("echo")(EchoKind)
    assert "echo" in registry.names() and registry.known("echo")
    kind = registry.get("echo")
    assert isinstance(kind, EchoKind)
    request = _request()
    make = registry.sandbox_factory("echo", request)
    assert make() == "an echo sandbox" and kind.requests == [request]


def test_a_kind_from_an_entry_point_is_found(clean_registry, monkeypatch):
    module = types.ModuleType("icplay_test_echo_plugin")
    module.EchoKind = EchoKind  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)
    point = EntryPoint(name="echo", value=f"{module.__name__}:EchoKind", group=registry.ENTRY_POINT_GROUP)
    monkeypatch.setattr(icplay.plugins, "entry_points",
                        lambda group: [point] if group == registry.ENTRY_POINT_GROUP else [])
    assert "echo" in registry.names()
    assert isinstance(registry.get("echo"), EchoKind)


def test_a_bash_env_runs_on_a_registered_kind(clean_registry):
    from icplay.envs.bash import BashSandboxes
    from icplay.tasks.model import Task

    register_sandbox("echo")(EchoKind)
    sandboxes = BashSandboxes("echo")
    task = Task(id="t", set="test", env="bash", query="q", gold="true")
    sandboxes._make_factory(task, "gold")
    (request,) = registry.get("echo").requests  # type: ignore[attr-defined]
    assert (request.language, request.image, request.trusted, request.own_image) == (
        "bash", "icplay-bash:latest", True, "")


def test_an_unknown_name_is_one_sentence_naming_the_choices():
    with pytest.raises(UnknownSandbox) as caught:
        registry.get("kubernetes")
    assert str(caught.value) == "no sandbox 'kubernetes' (known: docker, bwrap, podman)"
    assert isinstance(caught.value, SandboxError)
    from icplay.envs.bash import BashSandboxes

    with pytest.raises(SandboxError, match=r"^no sandbox 'kubernetes' \(known: docker, bwrap, podman\)$"):
        BashSandboxes("kubernetes")


def test_an_entry_point_that_is_not_a_kind_is_refused_in_one_sentence(clean_registry, monkeypatch):
    module = types.ModuleType("icplay_test_bad_plugin")
    module.NOT_A_KIND = object()  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)
    point = EntryPoint(name="bad", value=f"{module.__name__}:NOT_A_KIND", group=registry.ENTRY_POINT_GROUP)
    monkeypatch.setattr(icplay.plugins, "entry_points", lambda group: [point])
    with pytest.raises(UnknownSandbox, match="^entry point 'bad' in group icplay.sandboxes is not a sandbox kind"):
        registry.get("bad")


def test_bwrap_refuses_a_task_image_naming_the_kinds_that_run_images():
    request = SandboxRequest("bash", "intercode-nl2bash-fs1", HostRoot(lambda: Path("/nonexistent")),
                             own_image="a task that needs its own image")
    with pytest.raises(SandboxError) as caught:
        registry.sandbox_factory("bwrap", request)
    assert str(caught.value) == ("a task that needs its own image runs only on Docker or another sandbox that "
                                 "runs images (docker, podman): use --sandbox docker")


def test_bwrap_and_images_only_for_image_kinds():
    with pytest.raises(UnknownSandbox, match="^the 'bwrap' sandbox runs no images"):
        registry.image_engine("bwrap")


def test_the_cli_offers_the_registry_kinds(clean_registry, capsys):
    from icplay.cli import main

    register_sandbox("echo")(EchoKind)
    with pytest.raises(SystemExit):
        main(["play", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "bash, python, ctf: docker or bwrap or podman or echo; sql: sqlite or mysql" in text
