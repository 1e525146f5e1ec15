"""Working with saved episodes: re-execute one and flag where it diverges, fork one from a
turn. (Browsing and reading them is ``icplay.formats.summary``; the screens are in tui/.)"""

from icplay.review.fork import fork, open_fork
from icplay.review.reexecute import Reexecution, TurnCheck, reexecute

__all__ = ["Reexecution", "TurnCheck", "fork", "open_fork", "reexecute"]
