"""Plain, serialisable descriptions of a run's parts, from which each executor builds its own
live objects (on a Ray node, in a worker process, in this one).

A live policy holds a model client with a lock and a price table; a live env factory holds
sandbox pools. Neither crosses a process boundary, so an executor is handed these specs and
calls ``RunSpec.env_factory()`` and ``RunSpec.policy()`` where the episodes run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from icplay.agents.pricing import parse_price_option
from icplay.agents.protocols import Limits
from icplay.agents.strategies import strategy_name
from icplay.frontend.policies import PolicySpec
from icplay.languages import EnvFactory


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
        options: dict[str, Any] = {"compat": self.compat} if self.compat else {}
        return EnvFactory(self.env_name, self.sandbox, image=self.image, recycle=self.recycle, **options)


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
