"""Children that a test sends SIGINT start with SIGINT as a terminal gives it.

A test run started in the background by a script (``cmd &``) ignores SIGINT, and its
children inherit that; Python then installs no KeyboardInterrupt handler, and a test's
Ctrl+C reaches nobody (the run's SIGINT tests failed so, all together, in such a run)."""

from __future__ import annotations

import signal


def sigint_as_from_a_terminal() -> None:
    """A ``preexec_fn``: SIGINT back to its default in the child, before it execs."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
