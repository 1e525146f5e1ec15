"""The parts the live screen (icplay.tui.screens.live) is made of, one concern each: the work pane
and the human's own moves (``play``), the agent's panel and the answers to its proposals (``gate``),
the submit and the episode's end (``submit``), the clock of time worked (``clock``), the status bar
and what a study lets the screen show (``bar``), the opening of the episode (``opening``), and what
each of the driver's events changes among them (``events``).

Each part is a plain class holding the screen it serves, so that Textual's keys, messages and
timers stay the screen's; the screen keeps only what the parts share (the episode, the driver,
the broker's open request, how the episode ended) and routes its keys and messages to them.
"""
