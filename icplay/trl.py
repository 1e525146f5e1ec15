"""Environments for TRL's ``GRPOTrainer(environment_factory=...)``: one class per language.

    from icplay.trl import environment_class
    SqlEnvironment = environment_class("sql", sandbox="sqlite")
    trainer = GRPOTrainer(model=..., train_dataset=dataset, reward_funcs=reward,
                          environment_factory=SqlEnvironment)

    def reward(environments, **kwargs):          # TRL passes the instances it made
        return [env.get_reward() for env in environments]

TRL makes one instance per rollout with no arguments and calls ``reset(**row)`` with the
dataset row: its ``task`` column names the task (an id of the class's set); the returned
text (the task's query and how to answer) joins the prompt. The public methods are the
model's tools, their schemas derived by transformers' ``get_json_schema`` from the typed
arguments and Google-style docstrings: ``run(code)`` runs one action in the language and
returns what it printed; ``submit(answer)`` scores the episode (``answer``: the function
name for Python, the flag for CTF, nothing for Bash and SQL). ``get_reward()`` is the
submitted episode's reward (0.0 before a submit).

Each instance holds one sandbox, taken at reset from pools shared by every instance of the
class (warm containers, gold runs, admission), and given back at the next reset or when
the instance is dropped; ``Cls.shared.close()`` closes the pools after training. Every
public method is a tool to TRL, so the class has no other public methods. No TRL import
here: the classes are plain Python.
"""

from __future__ import annotations

import threading
import weakref
from pathlib import Path
from typing import Any

from icplay.envs.base import shown_observation
from icplay.languages import EnvFactory, get
from icplay.library import CallerLoop, find_task, load_task_list
from icplay.tasks.model import Task

RUN_DOCS = {
    "bash": ("Run one Bash command in the task's persistent shell (cd and variables carry over).",
             "The Bash command, e.g. `ls /testbed`."),
    "sql": ("Run one SQL query on the task's database.", "The SQL query, e.g. `SELECT name FROM singer`."),
    "python": ("Run Python code in the task's persistent interpreter (definitions carry over).",
               "Python code: a statement, an expression, or a whole function definition."),
    "ctf": ("Run one Bash command in the task's folder to look for the flag.", "The Bash command, e.g. `ls -la`."),
}
SUBMIT_DOCS = {
    "python": "The name of the function to score with the task's tests.",
    "ctf": "The flag, e.g. `picoCTF{...}`.",
}
DEFAULT_SUBMIT_DOC = "Leave empty: the episode is scored on its last output and state."


class Shared:
    """What every instance of one class shares: the env factory and the task set."""

    def __init__(self, env_name: str, sandbox: str | None, tasks: str | Path | list[Task] | None,
                 image: str | None, max_active: int | None):
        self.env_name, self.sandbox_name, self.image, self.max_active = env_name, sandbox, image, max_active
        self.tasks_source = tasks if tasks is not None else env_name
        self._factory: EnvFactory | None = None
        self._tasks: list[Task] | None = None
        self._lock = threading.Lock()

    @property
    def factory(self) -> EnvFactory:
        with self._lock:   # made on first reset: the default sandbox probes for Docker
            if self._factory is None:
                self._factory = EnvFactory(self.env_name, self.sandbox_name, image=self.image,
                                           max_active=self.max_active)
            return self._factory

    def tasks(self) -> list[Task]:
        with self._lock:
            if self._tasks is None:
                self._tasks = load_task_list(self.tasks_source, self.env_name)
            return self._tasks

    def close(self) -> None:
        with self._lock:
            factory, self._factory = self._factory, None
        if factory is not None:
            factory.close()


class IcplayEnvironment:
    """The base of the classes ``environment_class`` makes; ``shared`` is set per class."""

    shared: Shared

    def __init__(self):
        self._loop: CallerLoop | None = None
        self._reward = 0.0
        self._submitted = False
        # the sandbox goes back to the pool when TRL drops the instance
        self._finalizer = weakref.finalize(self, IcplayEnvironment._release, [None])

    @staticmethod
    def _release(holder: list) -> None:
        loop = holder[0]
        if loop is not None:
            loop.close()

    def reset(self, **kwargs: Any) -> str | None:
        """A pristine sandbox for the row's ``task`` (``task_id`` also accepted); the query."""
        task_id = kwargs.get("task", kwargs.get("task_id"))
        if task_id is None:
            raise ValueError("the dataset row has no 'task' column naming the task "
                             f"(an id of the {self.shared.env_name} set, e.g. {self.shared.tasks()[0].id})")
        task = find_task(self.shared.tasks(), str(task_id))
        if self._loop is None:
            self._loop = CallerLoop(self.shared.env_name, self.shared.factory.sandbox,
                                    env_factory=self.shared.factory)
            self._finalizer.detach()
            self._finalizer = weakref.finalize(self, IcplayEnvironment._release, [self._loop])
        self._loop.stop()
        self._reward, self._submitted = 0.0, False
        query = self._loop.reset(task, policy={"kind": "trl"})
        return f"{query}\n\nUse the `run` tool to act and the `submit` tool when you are done."

    def _act(self, code: str) -> str:
        if self._loop is None or self._loop.episode is None:
            raise ValueError("no episode: reset() comes first")
        if self._loop.done:
            raise ValueError("the episode was submitted: no more actions")
        outcome = self._loop.step(code)
        return shown_observation(outcome.observation, outcome.info)

    def _submit(self, answer: str) -> str:
        if self._loop is None or self._loop.episode is None:
            raise ValueError("no episode: reset() comes first")
        if self._loop.done:
            raise ValueError("the episode was already submitted")
        answer = (answer or "").strip()
        outcome = self._loop.step(f"submit {answer}" if answer else "submit")
        self._reward, self._submitted = float(outcome.reward), True
        return f"Submitted. Reward: {self._reward:.2f}"

    def get_reward(self) -> float:
        """The submitted episode's reward (0.0 if it was never submitted)."""
        return self._reward if self._submitted else 0.0

    def _close(self) -> None:
        """Give the sandbox back now (it also goes when the instance is dropped). Private:
        TRL offers every public method of the class to the model as a tool."""
        self._finalizer()
        self._loop = None


def _tool_methods(env_name: str):
    run_doc, code_doc = RUN_DOCS.get(env_name, (f"Run one action in the task's {env_name} environment.",
                                                "The action."))
    submit_doc = SUBMIT_DOCS.get(env_name, DEFAULT_SUBMIT_DOC)

    def run(self, code: str) -> str:
        return self._act(code)

    def submit(self, answer: str = "") -> str:
        return self._submit(answer)

    run.__doc__ = f"""{run_doc}

        Args:
            code: {code_doc}

        Returns:
            What the action printed, with icplay's notes (a cut output, a time limit).
        """
    submit.__doc__ = f"""Submit the episode for scoring; it ends the episode.

        Args:
            answer: {submit_doc}

        Returns:
            The reward, between 0 and 1.
        """
    return run, submit


def environment_class(env_name: str, sandbox: str | None = None, *, tasks: str | Path | list[Task] | None = None,
                      image: str | None = None, max_active: int | None = None) -> type[IcplayEnvironment]:
    """A class for ``environment_factory``: ``env_name``'s tasks (``tasks``: a set name, a
    task file or a list; default the language's bundled set) on ``sandbox``."""
    spec = get(env_name)   # UnknownLanguage names the known ones
    run, submit = _tool_methods(env_name)
    name = f"{spec.title.replace(' ', '')}Environment"
    return type(name, (IcplayEnvironment,), {
        "__doc__": f"icplay {spec.title} episodes for TRL: tools run and submit, then get_reward().",
        "__module__": __name__, "shared": Shared(env_name, sandbox, tasks, image, max_active),
        "run": run, "submit": submit,
    })
