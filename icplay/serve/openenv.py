"""An OpenEnv server over any icplay language and sandbox, built on ``openenv-core``'s own
``create_app`` (its HTTP routes, its WebSocket sessions, its schema endpoint).

    app = make_app("sql", sandbox="sqlite", max_envs=8)       # uvicorn.run(app)

    from openenv.core.generic_client import GenericEnvClient
    with GenericEnvClient(base_url="http://localhost:8000").sync() as env:
        first = env.reset(task="bookshop-01")                  # observation["query"]
        env.step({"code": "SELECT title FROM books"})
        done = env.step({"code": "submit"})                    # done.reward, observation["breakdown"]

Each WebSocket session is one ``IcplayEnvironment``: one episode at a time, its own
sandbox. OpenEnv's HTTP ``/reset`` and ``/step`` make a new environment per request and
close it after, so an HTTP episode is one request: ``/step`` with ``task`` and the
actions (``{"task": "bookshop-01", "code": GOLD, "then": ["submit"]}``).

The sessions of one server share icplay's warm sandbox pools, gold runs and admission
(``icplay.languages.EnvFactory``): at most a few env calls per core execute at once
however many sessions are open (icplay/envs/admission.py).
"""

from __future__ import annotations

import functools
import random
import threading
import uuid
from pathlib import Path
from typing import Any, Optional

from pydantic import Field

from openenv.core.env_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, EnvironmentMetadata, Observation, State

from icplay.envs.base import observation_parts
from icplay.languages import EnvFactory, get
from icplay.library import CallerLoop, find_task, load_task_list
from icplay.tasks.model import Task


class CodeAction(Action):
    """One action in the task's language; ``submit`` (``submit ARG``) ends the episode."""

    code: str = Field(..., description="a command, query or snippet in the env's language; "
                                       "'submit' (Python: 'submit NAME', CTF: 'submit FLAG') scores the episode")
    task: Optional[str] = Field(default=None, description="reset to this task first (an HTTP episode is "
                                                          "one request: OpenEnv's /step makes a new env)")
    then: list[str] = Field(default_factory=list, description="more actions run after code in this step, "
                                                              "e.g. ['submit']; the observation is the last one's")


class CodeObservation(Observation):
    """What the action printed, and at the end the reward's breakdown."""

    output: str = Field(default="", description="what the action printed (the task's query after reset)")
    exit_code: Optional[int] = Field(default=None, description="the action's exit code, where the language has one")
    notes: list[str] = Field(default_factory=list, description="icplay's notes on the action (cut, timed out, ...)")
    task: Optional[str] = Field(default=None, description="the task's key (set/id)")
    query: str = Field(default="", description="the task's query")
    breakdown: dict[str, Any] = Field(default_factory=dict, description="how the reward was computed (at submit)")


class EpisodeState(State):
    """The episode: its task, language, sandbox and status."""

    task: Optional[str] = None
    env: str = ""
    sandbox: str = ""
    status: str = "idle"
    reward: Optional[float] = None


class Family:
    """What the sessions of one server share: the env factory (pools, gold runs, admission)
    and the task set."""

    def __init__(self, env_name: str, sandbox: str | None = None, *, tasks: str | Path | None = None,
                 image: str | None = None, protocol: str = "agent", save_dir: str | Path | None = None,
                 max_active: int | None = None):
        get(env_name)   # UnknownLanguage names the known ones
        self.env_name, self.protocol, self.save_dir = env_name, protocol, save_dir
        self.factory = EnvFactory(env_name, sandbox, image=image, max_active=max_active)
        self.default_tasks = tasks if tasks is not None else env_name
        self._sets: dict[str, list[Task]] = {}
        self._lock = threading.Lock()
        self._next = 0

    def tasks(self, source: str | Path | None = None) -> list[Task]:
        key = str(source if source is not None else self.default_tasks)
        with self._lock:
            if key not in self._sets:
                self._sets[key] = load_task_list(key, self.env_name)
            return self._sets[key]

    def pick(self, tasks: list[Task], seed: int | None) -> Task:
        """A task of the set: drawn with ``seed``, else the next in turn."""
        if seed is not None:
            return random.Random(seed).choice(tasks)
        with self._lock:
            task = tasks[self._next % len(tasks)]
            self._next += 1
        return task

    def close(self) -> None:
        self.factory.close()


class IcplayEnvironment(Environment):
    """One OpenEnv session: icplay episodes over ``CallerLoop``, one at a time."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, family: Family):
        super().__init__()
        self.family = family
        self.loop = CallerLoop(family.env_name, family.factory.sandbox, protocol=family.protocol,
                               save_dir=family.save_dir, env_factory=family.factory)
        self._state = EpisodeState(env=family.env_name, sandbox=family.factory.sandbox)
        self._task: Task | None = None

    def reset(self, seed: Optional[int] = None, episode_id: Optional[str] = None, task: Optional[str] = None,
              tasks: Optional[str] = None, **kwargs: Any) -> CodeObservation:
        """A pristine sandbox for ``task`` (an id of ``tasks``, the server's set by default;
        drawn with ``seed``, else the next one in turn)."""
        if kwargs:
            raise ValueError(f"unknown reset argument(s) {', '.join(sorted(kwargs))} "
                             "(known: task, tasks, seed, episode_id)")
        task_list = self.family.tasks(tasks)
        chosen = find_task(task_list, task) if task is not None else self.family.pick(task_list, seed)
        self.loop.stop()
        query = self.loop.reset(chosen, policy={"kind": "openenv"})
        self._task = chosen
        self._state = EpisodeState(episode_id=episode_id or str(uuid.uuid4()), step_count=0, task=chosen.key,
                                   env=self.family.env_name, sandbox=self.family.factory.sandbox, status="running")
        return CodeObservation(output=query, query=query, task=chosen.key, done=False, reward=None,
                               metadata={"task": chosen.key, "env": self.family.env_name})

    def step(self, action: CodeAction, timeout_s: Optional[float] = None, **kwargs: Any) -> CodeObservation:
        if action.task is not None and (self._task is None or action.task not in (self._task.id, self._task.key)
                                        or self.loop.done):
            self.reset(task=action.task)
        if self._task is None:
            raise ValueError("no episode: reset first (over HTTP, send 'task' with the action: each request "
                             "is a new environment)")
        observations: list[CodeObservation] = []
        for code in [action.code, *action.then]:
            if self.loop.done:
                raise ValueError("the episode has ended: reset for the next one")
            observations.append(self._one(code))
        return observations[-1]

    def _one(self, code: str) -> CodeObservation:
        task = self._task
        assert task is not None, "step() reset the episode first"
        outcome = self.loop.step(code)
        self._state.step_count += 1
        info = outcome.info
        text, notes = observation_parts(outcome.observation, info)
        breakdown = info.get("breakdown") or {}
        if outcome.terminated:
            self._state.status = "submitted"
            self._state.reward = outcome.reward
        metadata = {"breakdown": breakdown, "notes": notes, "task": task.key,
                    **({"strict": info["strict"]} if "strict" in info else {})}
        return CodeObservation(output=text, exit_code=info.get("exit_code"), notes=notes, task=task.key,
                               query=task.query, breakdown=breakdown, done=outcome.terminated,
                               reward=outcome.reward, metadata=metadata)

    @property
    def state(self) -> EpisodeState:
        return self._state

    def get_metadata(self) -> EnvironmentMetadata:
        spec = get(self.family.env_name)
        return EnvironmentMetadata(name=f"icplay-{spec.name}", version="0.1.0",
                                   description=f"icplay {spec.title} on {self.family.factory.sandbox}: "
                                               f"{spec.description}")

    def close(self) -> None:
        self.loop.close()


def make_app(env_name: str, sandbox: str | None = None, *, max_envs: int = 8, tasks: str | Path | None = None,
             image: str | None = None, protocol: str = "agent", save_dir: str | Path | None = None,
             max_active: int | None = None):
    """OpenEnv's FastAPI app over ``env_name`` on ``sandbox``; ``max_envs`` WebSocket
    sessions at once. The shared pools close when the app shuts down."""
    family = Family(env_name, sandbox, tasks=tasks, image=image, protocol=protocol, save_dir=save_dir,
                    max_active=max_active)
    app = create_app(functools.partial(IcplayEnvironment, family), CodeAction, CodeObservation,
                     env_name=f"icplay-{env_name}", max_concurrent_envs=max_envs)
    app.router.on_shutdown.append(family.close)
    app.state.icplay_family = family
    return app
