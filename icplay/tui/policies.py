"""The policy a watched task is worked by, from an ``AgentChoice`` (no textual here).

``gold`` and ``replay:FILE`` need no API key; ``llm`` talks to any OpenAI-compatible
endpoint (``base_url``; the key from ``OPENAI_API_KEY``). A choice that cannot work raises
``PolicyError`` with one sentence, shown in the agent panel.
"""

from __future__ import annotations

from typing import Any

from icplay.tasks.model import Task
from icplay.tui.config import AgentChoice

MODES = ("auto", "confirm", "human")
PROTOCOLS = ("agent", "intercode")
ACTIONS = ("text", "tools")


class PolicyError(ValueError):
    """An agent choice that cannot drive this task (one sentence)."""


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


def make_policy(choice: AgentChoice, task: Task) -> tuple[Any, dict[str, Any]]:
    """(policy, the trajectory's policy block) for ``task``."""
    from icplay.agents.replay import GoldPolicy, ReplayPolicy

    check_choice(choice)
    if choice.policy == "gold":
        policy: Any = GoldPolicy()
    elif choice.policy.startswith("replay:"):
        path = choice.policy.split(":", 1)[1]
        try:
            policy = ReplayPolicy.from_path(path)
        except (OSError, ValueError) as exc:
            raise PolicyError(f"cannot read the recording {path}: {exc}") from None
        why = policy.check(task)
        if why:
            raise PolicyError(why)
    else:
        from icplay.agents.llm import ChatModel, LLMPolicy
        from icplay.agents.strategies import strategy_name

        try:
            strategy = strategy_name(choice.strategy or "tryagain")
        except ValueError as exc:
            raise PolicyError(str(exc)) from None
        try:
            options = choice.model_options()
        except ValueError as exc:
            raise PolicyError(str(exc)) from None
        model = ChatModel(choice.model or "", base_url=choice.base_url, **options)
        policy = LLMPolicy(model, strategy, choice.protocol, actions=choice.actions)
    info = {k: v for k, v in policy.describe().items() if v is not None}
    info.update({"protocol": choice.protocol, "ui": "tui-watch"})
    return policy, info
