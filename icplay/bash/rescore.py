"""Kept for code that imports it here: the Bash rescore lives in ``icplay.rescore.bash``
(the replay sits above the episode layer, beside the other languages' rescores)."""

from icplay.rescore.bash import rescore, rescore_episode

__all__ = ["rescore", "rescore_episode"]
