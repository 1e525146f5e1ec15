"""``icplay watch --study NAME --annotator A``: A supervises the study's agent on her queue.

The queue, its progress, the resume, the time limit and the other rules are ``play
--study``'s (icplay.study: ``Queue``, ``PlayRules``, ``StudyPlain``; the app's
``open_from_queue``); only who acts differs: an agent, its policy built here for each task
(its language) from the study's ``[agent]``, so that every annotator supervises the same
agent. The command line names the agent only when the study does not.
"""

from __future__ import annotations

import os
from typing import Any

from icplay.commands.play import study_env_factory, study_queue
from icplay.commands.study import study_errors
from icplay.commands.watch import actions_of
from icplay.driver import Broker, Driver, Limits
from icplay.episode import Episode
from icplay.frontend.config import AgentChoice
from icplay.frontend.policies import PolicyError, checked_choice, make_policy
from icplay.process import UserError
from icplay.study.model import Study
from icplay.study.plain import StudyPlain
from icplay.study.queue import Queue, resolve
from icplay.tasks.model import Task

PLAIN_UI = "plain-watch-study"


def run_watch_study(args) -> int:
    queue = study_queue(args, "watch")
    agent = study_agent_choice(args, queue.study)
    with study_errors():
        check_agent(agent, queue, args.task)
    if not args.plain:
        from icplay.tui.launch import run_study_app   # Textual loads only for the app: --plain's start-up

        return run_study_app(args, queue, agent=agent, max_turns=args.turns)
    with study_errors():
        return StudyPlain(queue, study_env_factory(args), seat=WatchSeat(agent, args.turns)).run(args.task)


def study_agent_choice(args, study: Study) -> AgentChoice:
    """The agent to supervise: the study's ``[agent]`` (the command line may not name another),
    else the command line's; how it is driven (mode, strategy, protocol) from the study when it
    says, else from the command line."""
    where = f"{study.path}: field 'agent'"
    model = args.model if args.model and args.model != os.environ.get("ICPLAY_MODEL") else None
    named = [option for option, value in (("--policy", args.policy), ("--model", model),
                                          ("--base-url", args.base_url)) if value]
    driven = {"strategy": args.strategy, "protocol": args.protocol, "actions": actions_of(args), "mode": args.mode}
    if study.agent:
        if named:
            raise UserError(f"{where}: the study names the agent every annotator supervises; leave out "
                            f"{', '.join(named)}")
        values: dict[str, Any] = {**driven, **study.agent}
    else:
        policy = args.policy or ("llm" if args.model else None)
        if policy is None:
            raise UserError(f"icplay watch --study: the study names no agent ([agent] in {study.path}): say who "
                            "proposes with --model NAME or --policy gold, or give the study one (icplay study new "
                            "... --agent-model MODEL)")
        values = {**driven, "policy": policy, "model": args.model, "base_url": args.base_url}
    try:
        return checked_choice(values)
    except PolicyError as exc:
        raise UserError(f"{where if study.agent else 'icplay watch --study'}: {exc}") from None


def check_agent(agent: AgentChoice, queue: Queue, first: str | None) -> None:
    """Build the agent for the first task (its client too: a missing key is one sentence now,
    before any sandbox starts)."""
    entry = queue.entry(first) if first is not None else queue.next_entry()
    if entry is None:
        return
    policy, _ = _policy(agent, resolve(entry.ref, str(queue.study.path), queue.study.task_files))
    client = getattr(getattr(policy, "model", None), "client", None)
    if callable(client):
        try:
            client()
        except Exception as exc:     # any agent's client library (openai's OpenAIError, a plug-in's own):
                                     # one sentence, before any sandbox starts
            raise UserError(f"the study's agent cannot start: {exc}") from None


def _policy(agent: AgentChoice, task: Task) -> tuple[Any, dict[str, Any]]:
    try:
        return make_policy(agent, task)
    except PolicyError as exc:
        raise UserError(f"the study's agent cannot play {task.key}: {exc}") from None


class WatchSeat:
    """An agent acts on each task, the annotator supervises (``icplay.study.plain.Seat``)."""

    supervised = True

    def __init__(self, agent: AgentChoice, max_turns: int):
        self.agent = agent
        self.limits = Limits(max_turns=max_turns)
        self.broker = Broker(agent.mode)     # one for the queue: the mode carries over from task to task
        self.model_names = tuple(n for n in (agent.model, agent.base_url) if n)
        self._made: dict[str, tuple[Any, dict[str, Any]]] = {}

    def policy_info(self, task: Task) -> dict[str, Any]:
        policy, info = self._made[task.key] = _policy(self.agent, task)
        return {**info, "ui": PLAIN_UI}

    def driver(self, episode: Episode, task: Task) -> Driver:
        made = self._made.pop(task.key, None)
        policy, info = made if made is not None else _policy(self.agent, task)
        episode.trajectory.adopt_policy({**info, "ui": PLAIN_UI})
        return Driver(episode, policy, self.agent.protocol, self.limits, broker=self.broker, on_failure="ask",
                      track_time=True)
