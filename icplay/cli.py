"""The ``icplay`` command. Each subcommand lives in its own module of ``icplay.commands``.

A module there defines ``register(subparsers)``, adds its parser and sets ``func`` (a
function taking the parsed args and returning an exit code). Errors that are the user's
to fix (bad task file, Docker down) print one sentence, not a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys
from icplay import __version__
from icplay.paths import home_dir
from icplay.sandbox.base import SandboxError
from icplay.process import Shutdown, UserError, exit_process
from icplay.store import StoreError, TrajectoryFileError
from icplay.tasks.model import TaskFileError
import icplay.commands as commands

USER_ERRORS: tuple[type[BaseException], ...] = (TaskFileError, SandboxError, StoreError, TrajectoryFileError)

ONE_LINE_ERRORS: tuple[type[BaseException], ...] = (UserError, *USER_ERRORS)

__all__ = ["Shutdown", "UserError", "USER_ERRORS", "build_parser", "console", "main"]   # the first two kept here for old callers


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="icplay", description="A terminal playground for InterCode-style interactive coding tasks.")
    parser.add_argument("--version", action="version", version=f"icplay {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"icplay.commands.{info.name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(sub)
    return parser


def tolerant_text_streams() -> None:
    """Bytes that are not UTF-8 on stdin reach icplay as lone surrogates (the trajectory
    keeps them, see icplay/store.py) instead of a UnicodeDecodeError; what stdout and
    stderr cannot encode is replaced instead of raising."""
    for stream, errors in ((sys.stdin, "surrogateescape"), (sys.stdout, "replace"), (sys.stderr, "replace")):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None and getattr(stream, "errors", None) == "strict":
            try:
                reconfigure(errors=errors)
            except (ValueError, OSError):
                pass


def unwritable_file(exc: OSError) -> str | None:
    """One line for a file icplay could not write (a read-only or full $ICPLAY_HOME or
    --out), else None: other OS errors are bugs and keep their traceback."""
    import errno

    if exc.errno not in (errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC,
                                                              errno.EDQUOT, errno.ENOTDIR):
        return None
    if not exc.filename:
        return None
    home = home_dir()
    where = str(exc.filename)
    hint = ""
    try:
        full, home_full = os.path.abspath(where), os.path.abspath(home)
        if full == home_full or full.startswith(home_full + os.sep):
            hint = (f"; icplay keeps its files in {home} ($ICPLAY_HOME): make it writable or point ICPLAY_HOME "
                    "at a writable folder (icplay doctor checks it)")
    except (OSError, ValueError):
        pass
    return f"cannot write {where}: {exc.strerror or exc}{hint}"


def _say(line: str) -> None:
    """One line on stderr, if there still is one (SIGHUP: the terminal may be gone)."""
    try:
        print(line, file=sys.stderr)
    except (OSError, ValueError):
        pass


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    tolerant_text_streams()
    with Shutdown() as shutdown:
        interrupted = False
        try:
            return _run(args, shutdown)
        except KeyboardInterrupt:
            interrupted = True
            _say(f"icplay: stopped ({shutdown.signal})" if shutdown.signal else "icplay: interrupted")
            shutdown.signal = shutdown.signal or "SIGINT"    # further signals: let the cleanup finish
            return shutdown.exit_code()
        finally:
            if interrupted or shutdown.signal:
                shutdown.stop_open_episodes()


def console() -> None:
    """The ``icplay`` command: ``main``, then the process ends (``exit_process``: without the
    interpreter's teardown where the command allows it)."""
    exit_process(main())


def _run(args, shutdown: Shutdown) -> int:
    try:
        code = int(args.func(args) or 0)
        return shutdown.exit_code() if shutdown.signal else code
    except ONE_LINE_ERRORS as exc:
        print(f"icplay: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # The reader went away (`icplay tasks | head`): stop quietly, as Unix tools do.
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 0
    except OSError as exc:
        line = unwritable_file(exc)
        if line is None:
            raise
        print(f"icplay: {line}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    # `python -m icplay.cli`: run the imported module's main, so that the UserError the
    # commands raise (icplay.cli.UserError) is the one main catches, not __main__'s copy.
    from icplay.cli import main as imported_main

    sys.exit(imported_main())
