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
from icplay.sandbox.base import SandboxError
from icplay.tasks.model import TaskFileError

USER_ERRORS: tuple[type[BaseException], ...] = (TaskFileError, SandboxError)


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


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except (UserError, *USER_ERRORS) as exc:
        print(f"icplay: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("icplay: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`icplay tasks | head`): stop quietly, as Unix tools do.
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 0


if __name__ == "__main__":
    # ``python -m icplay.cli``: run the imported module's main, so that the UserError the
    # commands import (icplay.cli.UserError) is the class main catches, not __main__'s copy
    from icplay.cli import main as _main

    sys.exit(_main())
