"""``run_app(args)``: what ``icplay play`` calls when ``--plain`` is not given.

``args`` carries ``env`` (bash | sql | None), ``tasks`` (a set name or a task file),
``task`` (an id), ``sandbox``, ``session`` (a baseline session name), ``image``, and
optionally ``out`` (the folder for the session's trajectories) and ``strict``.
Problems the user can fix (an unknown set or task id, a bad config file) are raised as
the CLI's user errors before the screen is taken over, so they print as one line.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys

from icplay.tasks.model import TaskFileError


def check_terminal() -> None:
    """The app needs a terminal on stdin and stdout; without one Textual would spin a core
    forever waiting for one. Say so in one line instead."""
    missing = [name for name, stream in (("stdin", sys.stdin), ("stdout", sys.stdout))
               if stream is None or not _isatty(stream)]
    if missing:
        from icplay.cli import UserError

        raise UserError(f"the playground needs a terminal ({' and '.join(missing)} "
                        f"{'is' if len(missing) == 1 else 'are'} not one): use `icplay play bash --plain` "
                        "or `icplay play sql --plain` for line mode")


@contextlib.contextmanager
def quit_on_shutdown_signal(app):
    """SIGTERM/SIGHUP quit the app as its quit key does (screens save, the terminal is
    given back), instead of an exception raised into Textual's event loop."""
    from icplay.cli import Shutdown

    shutdown = Shutdown.current

    def deliver() -> bool:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return False
        loop.call_soon_threadsafe(app.exit)
        return True

    if shutdown is not None:
        shutdown.deliver = deliver
    try:
        yield
    finally:
        if shutdown is not None:
            shutdown.deliver = None


def _isatty(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):
        return False


def run_app(args) -> int:
    from icplay.tui.app import Catalog, PlayApp
    from icplay.tui.config import ConfigError, load_config

    env = getattr(args, "env", None)
    tasks = getattr(args, "tasks", None)
    task_id = getattr(args, "task", None)
    try:
        config = load_config()
    except ConfigError as exc:
        raise TaskFileError(str(exc).split(":", 1)[0], str(exc).split(":", 1)[1].strip()) from None
    if getattr(args, "strict", False):
        config.strict = True
    catalog = Catalog(env, tasks)
    if task_id is not None:
        catalog.find(str(task_id), catalog.default_set(env, tasks))   # fail early, in one line
    app = PlayApp(env=env, tasks=tasks, task=None if task_id is None else str(task_id),
                  sandbox=getattr(args, "sandbox", None), session=getattr(args, "session", None),
                  image=getattr(args, "image", None), config=config, catalog=catalog,
                  out=getattr(args, "out", None))
    check_terminal()
    try:
        with quit_on_shutdown_signal(app):
            app.run()
    finally:
        app.close_envs()
    return app.return_code or 0


def run_watch(args, policy, policy_info: dict, tasks: list) -> int:
    """What ``icplay watch`` calls without ``--plain``: the watch screen.

    ``args`` is watch's parsed command line (env, tasks, task, mode, protocol, turns,
    sandbox, image, session, out); ``policy`` proposes (an ``icplay.episode.Policy``),
    ``policy_info`` describes it for the trajectory, ``tasks`` are the tasks it can play.
    The screen drives each episode with ``icplay.driver.Driver`` (docs/driver.md).
    """
    import sys

    print("icplay: the watch screen is not built yet; use icplay watch ... --plain", file=sys.stderr)
    return 2
