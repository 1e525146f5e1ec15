"""InterCode's experiment loop, one turn at a time: what ``--protocol intercode`` does with an action.

InterCode's ``experiments/eval_n_turn.py`` did not treat every language alike. For Bash
and SQL it ran the action and submitted right after it (the reward of the state); for
Python it ran an action starting with ``def``, submitted that function by its name and,
when a test raised, showed the model a retry message instead of the output; any other
Python action ran and scored 0 without a submit. A language's ``TurnRule`` says which:
``plan(action)`` (pure) tells the driver and the rescore what to run and how to score,
``feedback(result)`` the message that replaces the observation for the model, if any.
Both use only the env's public ``step`` / ``submit``, so the loop holds whatever the
reward's implementation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from icplay.envs.base import SubmitResult


@dataclass(frozen=True)
class TurnPlan:
    """What one turn of InterCode's loop does with its action."""

    run: bool = True                 # the action runs (env.step)
    score: bool = True               # then env.submit(submit_arg) scores it; False: the turn scores 0 unscored
    submit_arg: str | None = None    # the submit's argument (None: the env's default)


@dataclass(frozen=True)
class TurnRule:
    """A language's turn of InterCode's loop (default: run, then submit with no argument)."""

    plan: Callable[[str], TurnPlan] = lambda action: TurnPlan()
    feedback: Callable[[SubmitResult], str | None] = lambda result: None


RUN_THEN_SUBMIT = TurnRule()
