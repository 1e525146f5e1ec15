"""Prompting strategies from the InterCode paper, as chat messages built from a trajectory.

The messages are rebuilt from the task and the trajectory on every call, never kept in
the policy, so a trajectory that a human edited, rejected or took over (or one resumed
from disk) reads back to the model as what actually happened:

- an agent turn: the model's own reply, then the output (and the reward, when the turn
  was scored under the ``intercode`` protocol);
- an agent turn a human edited: the model's reply, then "a human replaced your command
  with ..." and the output of what ran;
- a rejected proposal: the model's reply, then the reviewer's comment;
- a human turn: "the human at the keyboard ran ..." and its output;
- an unparsable reply: the reply, then the retry message.

Strategies: ``single`` (one action, no feedback), ``tryagain`` (one action per turn, the
output fed back), ``react`` (Thought/Action), ``plan`` (Plan & Solve: first a numbered
plan, then one action per step; after the last step it goes on Try-Again style).
"""

from __future__ import annotations

import re

from icplay.agents import prompts
from icplay.agents.context import ContextLimits, Exchange, fit, observation_block
from icplay.agents.context import cut_middle
from icplay.agents.parsing import fence_label, language_name
from icplay.envs.base import shown_observation
from icplay.episode import AGENT, AGENT_EDITED, HUMAN, Trajectory, Turn
from icplay.tasks.model import Task

STRATEGIES = ("single", "tryagain", "react", "plan")
ALIASES = {
    "single-turn": "single", "singleturn": "single", "single_turn": "single", "one-shot": "single",
    "try-again": "tryagain", "try_again": "tryagain", "multi-turn": "tryagain",
    "plan-solve": "plan", "plan_and_solve": "plan", "plan-and-solve": "plan", "plansolve": "plan",
    "plan_solve": "plan",
}


def strategy_name(name: str) -> str:
    key = name.strip().lower()
    key = ALIASES.get(key, key)
    if key not in STRATEGIES:
        raise ValueError(f"unknown strategy {name!r} (one of: {', '.join(STRATEGIES)})")
    return key


def counted_turns(trajectory: Trajectory) -> list[Turn]:
    """The turns that used up a turn of the budget: executed actions and unparsable replies."""
    return [t for t in trajectory.turns if t.counts]


def find_plan(trajectory: Trajectory) -> list[str] | None:
    for turn in trajectory.turns:
        plan = turn.info.get("plan")
        if plan:
            return list(plan)
    return None


def parse_plan(text: str, max_steps: int = 10) -> list[str]:
    steps = [m.group(1).strip() for m in re.finditer(r"^\s*(?:step\s*)?\d+\s*[.):]\s*(.+)$", text, re.I | re.M)]
    if not steps:
        steps = [line.strip(" -*\t") for line in text.splitlines() if line.strip(" -*\t")]
    return [s for s in steps if s][:max_steps] or ["Solve the task."]


def fenced(action: str, language: str) -> str:
    return f"```{fence_label(language)}\n{action}\n```"


def _assistant_text(turn: Turn, language: str, strategy: str, proposed: bool = True) -> str:
    raw = turn.info.get("raw")
    if raw:
        return raw
    code = (turn.proposed if proposed and turn.proposed else turn.action) or ""
    if strategy == "react":
        return f"Thought: {turn.thought or ''}\nAction: {fenced(code, language)}".strip()
    return fenced(code, language)


def _output(turn: Turn) -> tuple[str, str, str]:
    """(prefix, observation, suffix) of the user message reporting a turn's result. A protocol's
    feedback (InterCode's Python retry message) replaces the output, as InterCode showed it."""
    feedback = (turn.info or {}).get("feedback")
    obs = feedback or observation_block(shown_observation(turn.observation, turn.info))
    suffix = ""
    if turn.exit_code not in (None, 0):
        suffix += f"\n(exit code {turn.exit_code})"
    if turn.reward is not None:
        suffix += f"\nReward: {turn.reward:g}"
    return "Output:\n", obs, suffix


def exchanges(trajectory: Trajectory, task: Task, strategy: str, limits: ContextLimits) -> list[Exchange]:
    """The trajectory as text-protocol exchanges (a reply, then what it was told back)."""
    return [ex for turn in trajectory.turns if (ex := turn_exchange(turn, task.env, strategy, limits)) is not None]


def turn_exchange(turn: Turn, language: str, strategy: str, limits: ContextLimits) -> Exchange | None:
    """One turn as a text-protocol exchange; None for a turn that ran nothing."""
    unit = prompts.unit(language)
    info = turn.info or {}
    if info.get("invalid"):
        # a reply with no text (cut while thinking, reasoning only) is not sent back as an empty
        # assistant message, which some servers refuse: the retry message joins the user's turn
        return Exchange(info.get("raw") or None, turn.observation)
    if info.get("rejected"):
        comment = turn.comment or "no reason given"
        return Exchange(_assistant_text(turn, language, strategy),
                        f"A human reviewer rejected this {unit} without running it. Their comment: {comment}")
    if not turn.action:
        return None
    prefix, obs, suffix = _output(turn)
    obs = _cut(obs, limits)
    if turn.author == HUMAN:
        prefix = f"The human at the keyboard ran:\n{fenced(turn.action, language)}\n" + prefix
        return Exchange(None, prefix + obs + suffix, obs, prefix, suffix)
    if turn.author == AGENT_EDITED:
        prefix = edit_note(turn, language) + prefix
        return Exchange(_assistant_text(turn, language, strategy), prefix + obs + suffix, obs, prefix, suffix)
    return Exchange(_assistant_text(turn, language, strategy, proposed=False), prefix + obs + suffix, obs, prefix,
                    suffix)


def edit_note(turn: Turn, language: str) -> str:
    """What the model is told when a human replaced its action before it ran."""
    note = f"A human reviewer replaced your {prompts.unit(language)} with:\n{fenced(turn.action, language)}\n"
    if turn.comment:
        note += f"Their comment: {turn.comment}\n"
    return note


def _cut(text: str, limits: ContextLimits) -> str:
    return cut_middle(text, limits.max_observation_chars)


def plan_instruction(k: int, plan: list[str], task: Task, protocol: str) -> str:
    if k < len(plan):
        return prompts.fill(prompts.PLAN_STEP, task.env, n=k + 1, step=plan[k])
    done = prompts.PLAN_DONE_INTERCODE if protocol == "intercode" else prompts.PLAN_DONE
    return prompts.fill(done, task.env)


def build_messages(task: Task, trajectory: Trajectory, strategy: str, protocol: str,
                   limits: ContextLimits | None = None, plan: list[str] | None = None,
                   demos: list[str] | None = None, actions: str = "text") -> list[dict]:
    """The chat to send for the next action (``demos``: worked examples for the system message;
    ``actions``: the action protocol, text or tools, see ``icplay.agents.tools``)."""
    limits = limits or ContextLimits()
    system = prompts.system_prompt(task.env, strategy, protocol, trajectory.sandbox, demos, actions)
    head = [{"role": "system", "content": system}, {"role": "user", "content": prompts.task_message(task)}]
    if actions == "tools":
        from icplay.agents.tools import tool_exchanges   # an import cycle: tools builds on this module

        exs = tool_exchanges(trajectory, task, strategy, limits)
    else:
        exs = exchanges(trajectory, task, strategy, limits)
    tail: list[dict] = []
    if strategy == "plan" and plan is not None:
        head[-1] = {"role": "user", "content": head[-1]["content"] + "\n\n"
                    + prompts.fill(prompts.PLAN_REQUEST, task.env, steps=len(plan))}
        head.append({"role": "assistant", "content": "\n".join(f"{i + 1}. {s}" for i, s in enumerate(plan))})
        head.append({"role": "user", "content": plan_instruction(0, plan, task, protocol)})
        for i, ex in enumerate(exs):
            exs[i] = ex.with_note(plan_instruction(i + 1, plan, task, protocol))
    return fit(head, exs, tail, limits)


def plan_request_messages(task: Task, trajectory: Trajectory, max_steps: int,
                          demos: list[str] | None = None) -> list[dict]:
    system = prompts.system_prompt(task.env, "plan", trajectory.policy.get("protocol", "agent"), trajectory.sandbox,
                                   demos)
    request = prompts.fill(prompts.PLAN_REQUEST, task.env, steps=max_steps)
    return [{"role": "system", "content": system},
            {"role": "user", "content": prompts.task_message(task) + "\n\n" + request}]


__all__ = ["STRATEGIES", "strategy_name", "build_messages", "plan_request_messages", "parse_plan", "find_plan",
           "counted_turns", "language_name", "AGENT"]
