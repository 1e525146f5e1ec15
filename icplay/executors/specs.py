"""Plain, serialisable descriptions of a run's parts, from which each executor builds its own
live objects (on a Ray node, in a worker process, in this one).

A live policy holds a model client with a lock and a price table; a live env factory holds
sandbox pools. Neither crosses a process boundary, so an executor is handed these specs and
calls ``RunSpec.env_factory()`` and ``RunSpec.policy()`` where the episodes run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from icplay.agents.context import ContextLimits
from icplay.agents.pricing import PriceTable, parse_price_option
from icplay.agents.protocols import Limits
from icplay.agents.replay import GoldPolicy, ReplayPolicy
from icplay.agents.strategies import strategy_name
from icplay.formats.export import load_demos
from icplay.languages import EnvFactory
from icplay.tasks.registry import find_set


@dataclass(frozen=True)
class EnvSpec:
    """Which language, on which sandbox and image; ``recycle`` keeps Docker containers warm;
    ``compat="intercode"`` runs Bash with InterCode's own execution semantics."""

    env_name: str
    sandbox: str | None = None
    image: str | None = None
    recycle: bool = True
    compat: str | None = None

    def factory(self):
        options = {"compat": self.compat} if self.compat else {}
        return EnvFactory(self.env_name, self.sandbox, image=self.image, recycle=self.recycle, **options)


@dataclass(frozen=True)
class PolicySpec:
    """What builds the policy: ``kind`` gold, replay or llm, and its settings.

    A replay names its recording and the task set it was recorded on (InterCode names tasks
    by their index in that set). An LLM's API key travels only when it was given on the
    command line; otherwise each machine's own $OPENAI_API_KEY is used."""

    kind: str
    replay: str | None = None
    task_set: str | None = None
    model: str | None = None
    base_url: str | None = None
    api_key: str | None = None
    options: dict[str, Any] = field(default_factory=dict)   # the request's parameters (ChatModel keywords)
    timeout: float = 60.0
    retries: int = 6
    strategy: str = "tryagain"
    protocol: str = "intercode"
    context: int = 12000
    prices: dict[str, Any] = field(default_factory=dict)
    demos: str | None = None
    actions: str = "text"       # text (a fenced block) or tools (native tool calls): icplay.agents.tools

    def build(self, env_name: str):
        if self.kind == "gold":
            return GoldPolicy()
        if self.kind == "replay":
            tasks = None
            if self.task_set:
                tasks = find_set(self.task_set, env_name).load()
            return ReplayPolicy.from_path(self.replay, tasks)
        if self.kind != "llm":
            raise ValueError(f"unknown policy kind {self.kind!r} (gold, replay or llm)")
        from icplay.agents.llm import ChatModel, LLMPolicy   # openai loads only for an LLM policy

        demos = []
        if self.demos:
            demos = load_demos(self.demos, env_name)
        model = ChatModel(self.model, base_url=self.base_url, api_key=self.api_key, timeout=self.timeout,
                          retries=self.retries, prices=PriceTable(dict(self.prices)), **self.options)
        return LLMPolicy(model, self.strategy, self.protocol, ContextLimits(max_tokens=self.context), demos=demos,
                         actions=self.actions)


@dataclass(frozen=True)
class RunSpec:
    """Everything an executor needs to play any task of a run, as plain data."""

    env: EnvSpec
    policy: PolicySpec
    protocol: str = "intercode"
    limits: Limits = field(default_factory=Limits)
    policy_info: dict[str, Any] = field(default_factory=dict)   # recorded in each trajectory

    def env_factory(self):
        return self.env.factory()

    def build_policy(self):
        return self.policy.build(self.env.env_name)


def policy_spec_from_args(args, kind: str, task_set: str | None = None) -> PolicySpec:
    """The PolicySpec of ``icplay run``'s options."""
    if kind in ("gold", "replay"):
        return PolicySpec(kind, replay=args.replay, task_set=task_set if kind == "replay" else None)
    return PolicySpec("llm", model=args.model, base_url=args.base_url, api_key=args.api_key,
                      options=dict(getattr(args, "model_options", {})), timeout=args.timeout,
                      retries=args.retries, strategy=strategy_name(args.strategy), protocol=args.protocol,
                      context=args.context, prices=dict(parse_price_option(p) for p in args.price),
                      demos=str(args.demos) if getattr(args, "demos", None) else None,
                      actions=getattr(args, "actions", None) or "text")
