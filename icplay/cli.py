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
import signal
import sys
from typing import Callable

from icplay import __version__
from icplay.sandbox.base import SandboxError
from icplay.store import StoreError, TrajectoryFileError, stop_open_trajectories
from icplay.tasks.model import TaskFileError

USER_ERRORS: tuple[type[BaseException], ...] = (TaskFileError, SandboxError, StoreError, TrajectoryFileError)


class UserError(RuntimeError):
    """Something the user can fix; printed as one line without a traceback."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="icplay", description="A terminal playground for InterCode-style interactive coding tasks.")
    parser.add_argument("--version", action="version", version=f"icplay {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    import icplay.commands as commands

    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"icplay.commands.{info.name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(sub)
    return parser


# --- orderly shutdown on signals -------------------------------------------------------
#
# SIGTERM and SIGHUP take the path Ctrl+C (SIGINT) takes: KeyboardInterrupt in the main
# thread. Every command already unwinds that way: running commands are interrupted,
# envs closed (their containers removed; ``atexit`` removes any container still tracked),
# and the runner stops its episodes. Afterwards every episode this process still has open
# is saved as ``stopped`` (``stop_open_trajectories``). A second SIGTERM/SIGHUP during
# that cleanup is ignored so it can finish; SIGKILL is the way to cut it short.

_SHUTDOWN_SIGNALS = ("SIGTERM", "SIGHUP")


class Shutdown:
    """The shutdown signals' handler while ``main`` runs; remembers which signal came.

    An event loop that must not be unwound by an exception (the Textual app) sets
    ``Shutdown.deliver`` around its run: a function that asks it to quit in order and
    returns True (False: raise KeyboardInterrupt after all)."""

    current: "Shutdown | None" = None

    def __init__(self):
        self.signal: str | None = None
        self.deliver: Callable[[], bool] | None = None
        self._previous: dict[int, object] = {}

    def __enter__(self) -> "Shutdown":
        import threading

        if threading.current_thread() is threading.main_thread():
            for name in _SHUTDOWN_SIGNALS:
                sig = getattr(signal, name, None)
                if sig is not None:
                    self._previous[sig] = signal.signal(sig, self._on_signal)
            Shutdown.current = self
        return self

    def __exit__(self, *exc) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        if Shutdown.current is self:
            Shutdown.current = None

    def _on_signal(self, signum: int, frame) -> None:
        if self.signal is None:
            self.signal = signal.Signals(signum).name
            if self.deliver is not None and self.deliver():
                return
            raise KeyboardInterrupt(self.signal)

    def exit_code(self) -> int:
        return 128 + int(getattr(signal, self.signal)) if self.signal else 130

    def stop_open_episodes(self) -> None:
        why = f"icplay was stopped ({self.signal})" if self.signal else "icplay was interrupted"
        stop_open_trajectories(why)


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
    from icplay.paths import home_dir

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


def _run(args, shutdown: Shutdown) -> int:
    try:
        code = int(args.func(args) or 0)
        return shutdown.exit_code() if shutdown.signal else code
    except (UserError, *USER_ERRORS) as exc:
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
