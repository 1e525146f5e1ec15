"""Replaying recorded episodes and recomputing their rewards, for every language.

``icplay.rescore.engine`` holds what the four languages share: the per-turn record, the
agreement summary, and the loop that matches episodes to tasks and replays them ``jobs``
at a time. Each language's replay of one episode is its own module here (``sql``,
``bash``, ``python``, ``ctf``); ``icplay rescore`` (icplay/commands/rescore.py) picks one.
The package sits above the episode layer: it reads InterCode's formats
(``icplay.formats.intercode``) and runs any language's env.
"""

from icplay.rescore.engine import (AGREE_WITHIN, Summary, TurnRecord, replay_all, resolve_tasks, summarize,
                                   turn_record)

__all__ = ["AGREE_WITHIN", "Summary", "TurnRecord", "replay_all", "resolve_tasks", "summarize", "turn_record"]
