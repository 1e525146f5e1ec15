"""``PolicySpec``: the one plain description every policy is built from (no textual here).

``icplay run`` and its executors (on a Ray node, in a worker process), ``icplay watch``
(line mode and screen) and the playground's watch key all describe their policy as a
``PolicySpec`` and call ``build``: ``gold`` and ``replay`` need no API key; ``llm`` talks
to any OpenAI-compatible endpoint (``base_url``; the key from ``OPENAI_API_KEY`` unless
given). A spec is plain data, so it crosses process boundaries where a live policy (a model
client with a lock, a price table) cannot. ``make_policy`` turns the screen's
``AgentChoice`` into one; a choice that cannot work raises ``PolicyError`` with one
sentence, shown in the agent panel.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from icplay.driver.broker import MODES
from icplay.driver.driver import PROTOCOLS
from icplay.frontend.config import AgentChoice
from icplay.tasks.model import Task
from icplay.agents.replay import GoldPolicy, ReplayPolicy
from icplay.tasks.registry import find_set
from icplay.agents.context import ContextLimits
from icplay.agents.llm import ChatModel, LLMPolicy
from icplay.agents.pricing import PriceTable
from icplay.formats.export import load_demos
from icplay.agents.strategies import strategy_name

ACTIONS = ("text", "tools")
KINDS = ("gold", "replay", "llm")


class PolicyError(ValueError):
    """An agent choice that cannot drive this task (one sentence)."""


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
    timeout: float = 300.0
    retries: int = 6
    strategy: str = "tryagain"
    protocol: str = "intercode"
    context: int = 12000
    prices: dict[str, Any] = field(default_factory=dict)
    demos: str | None = None
    actions: str = "text"       # text (a fenced block) or tools (native tool calls): icplay.agents.tools

    def build(self, env_name: str, tasks: list[Task] | None = None) -> Any:
        """The live policy. A replay reads its recording against ``tasks`` (else the spec's
        ``task_set``)."""
        if self.kind == "gold":
            return GoldPolicy()
        if self.kind == "replay":
            if not self.replay:
                raise ValueError("a replay policy needs its recording (replay=FILE)")
            if tasks is None and self.task_set:
                tasks = find_set(self.task_set, env_name).load()
            return ReplayPolicy.from_path(self.replay, tasks)
        if self.kind != "llm":
            raise ValueError(f"unknown policy kind {self.kind!r} (gold, replay or llm)")

        demos = []
        if self.demos:
            demos = load_demos(self.demos, env_name)
        model = ChatModel(self.model or "", base_url=self.base_url, api_key=self.api_key, timeout=self.timeout,
                          retries=self.retries, prices=PriceTable(dict(self.prices)), **self.options)
        return LLMPolicy(model, self.strategy, self.protocol, ContextLimits(max_tokens=self.context), demos=demos,
                         actions=self.actions)


def check_choice(choice: AgentChoice) -> None:
    if choice.mode not in MODES:
        raise PolicyError(f"unknown mode {choice.mode!r} (one of: {', '.join(MODES)})")
    if choice.protocol not in PROTOCOLS:
        raise PolicyError(f"unknown protocol {choice.protocol!r} (one of: {', '.join(PROTOCOLS)})")
    if choice.actions not in ACTIONS:
        raise PolicyError(f"unknown actions {choice.actions!r} (text or tools)")
    if choice.policy not in ("llm", "gold") and not choice.policy.startswith("replay:"):
        raise PolicyError(f"unknown policy {choice.policy!r} (llm, gold or replay:FILE)")
    if choice.policy == "llm" and not choice.model:
        raise PolicyError("say which model: model = \"...\" under [agent] in config.toml, or --model "
                          "(or try policy gold, which needs no API key)")


def checked_choice(values: dict[str, Any]) -> AgentChoice:
    """The agent choice of ``values`` (its fields, None ones left out; a model only for an
    LLM), checked (``PolicyError``)."""
    values = {k: v for k, v in values.items() if v is not None}
    if values.get("policy", "llm") != "llm":
        values.pop("model", None)
    choice = AgentChoice(**values)
    check_choice(choice)
    return choice


def spec_of_choice(choice: AgentChoice) -> PolicySpec:
    """The ``PolicySpec`` of a screen's agent choice (checked first: ``PolicyError``)."""
    check_choice(choice)
    if choice.policy == "gold":
        return PolicySpec("gold")
    if choice.policy.startswith("replay:"):
        return PolicySpec("replay", replay=choice.policy.split(":", 1)[1])
    try:
        strategy = strategy_name(choice.strategy or "tryagain")
        options = choice.model_options()
    except ValueError as exc:
        raise PolicyError(str(exc)) from None
    return PolicySpec("llm", model=choice.model, base_url=choice.base_url, options=options, strategy=strategy,
                      protocol=choice.protocol, actions=choice.actions)


def make_policy(choice: AgentChoice, task: Task) -> tuple[Any, dict[str, Any]]:
    """(policy, the trajectory's policy block) for ``task``."""
    spec = spec_of_choice(choice)
    try:
        policy = spec.build(task.env)
    except (OSError, ValueError) as exc:
        if spec.kind == "replay":
            raise PolicyError(f"cannot read the recording {spec.replay}: {exc}") from None
        raise PolicyError(str(exc)) from None
    if spec.kind == "replay" and (why := policy.check(task)):
        raise PolicyError(why)
    info = {k: v for k, v in policy.describe().items() if v is not None}
    info.update({"protocol": choice.protocol, "ui": "tui-watch"})
    return policy, info


__all__ = ["PolicySpec", "PolicyError", "AgentChoice", "check_choice", "checked_choice", "spec_of_choice", "make_policy", "ACTIONS",
           "KINDS"]
