"""``python -m icplay``: the same as the ``icplay`` command."""

from icplay.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
