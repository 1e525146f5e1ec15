"""``icplay view``: browse, compare, re-execute and fork saved episodes.

Without options it opens the viewer (the Textual app, docs/view.md) over PATHS — run
folders, session folders, trajectory files, InterCode results or log files — or, by
default, everything under $ICPLAY_HOME (sessions, runs, replaced attempts).
``--reexecute FILE`` runs a saved episode again in a fresh sandbox and prints each turn,
flagging those whose observation, exit code or reward now differs (with a diff); it exits
1 when anything differs.
"""

from __future__ import annotations

import sys
from pathlib import Path


def register(sub) -> None:
    p = sub.add_parser("view", help="browse, compare, re-execute and fork saved episodes")
    p.add_argument("paths", nargs="*", type=Path, metavar="PATH",
                   help="run or session folders, trajectory files, InterCode files (default: all of $ICPLAY_HOME)")
    p.add_argument("--reexecute", metavar="FILE",
                   help="replay this saved episode in a fresh sandbox and flag the turns that now differ")
    p.add_argument("--sandbox", help="bash: docker or bwrap; sql: sqlite or mysql (re-execution and forks)")
    p.add_argument("--image", help="Docker image for Bash episodes (re-execution and forks)")
    p.add_argument("--session", default="forks", help="session forks are saved in (default: forks)")
    p.set_defaults(func=run)


def run(args) -> int:
    if args.reexecute:
        return reexecute_file(args.reexecute, args.sandbox, args.image)
    from icplay.formats.summary import scan
    from icplay.session import check_session_name

    check_session_name(args.session)
    scan(args.paths or None)          # a missing path is one line before the screen is taken over
    from icplay.tui.launch import check_terminal, quit_on_shutdown_signal
    from icplay.tui.screens.view import ViewApp

    check_terminal()
    app = ViewApp(paths=args.paths or None, sandbox=args.sandbox, image=args.image, fork_session=args.session)
    try:
        with quit_on_shutdown_signal(app):
            app.run()
    finally:
        app.close_envs()
    return app.return_code or 0


def reexecute_file(ref: str, sandbox: str | None = None, image: str | None = None) -> int:
    from icplay.languages import make_env
    from icplay.formats.summary import load_episode
    from icplay.review import reexecute

    traj = load_episode(ref)
    if traj.env not in ("bash", "sql"):
        from icplay.cli import UserError

        raise UserError(f"{ref}: re-execution runs Bash and SQL episodes, not {traj.env}")
    print(f"re-executing {traj.task.get('set')}/{traj.task.get('id')} ({len(traj.turns)} turns, episode {traj.id})",
          flush=True)
    env = make_env(traj.env, sandbox=sandbox, image=image or traj.task.get("image"),
                   progress=lambda line: print(line, file=sys.stderr))
    try:
        result = reexecute(traj, env)
    finally:
        env.close()
    print(f"on a fresh {result.sandbox} sandbox:")
    print(result.render())
    return 0 if result.reproduced else 1
