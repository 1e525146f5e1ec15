"""What every front end for humans shares, with no textual in it: a TUI, a web page or a
terminal REPL builds on these and on ``icplay.driver`` (the one episode loop).

- ``leases`` — the sandbox lease pool: each screen (page, tab) borrows its own env;
- ``opening`` — a task's episode opened on a lease (resumed, or shown read-only when submitted);
- ``clock`` — the time worked, held while paused or a dialog is open;
- ``policies`` — ``PolicySpec``, the one description a policy is built from (run, watch,
  the screens, the executors), and the agent choice of a watched task;
- ``config`` — config.toml (theme, keys, the ``[agent]`` defaults).
"""
