"""``python -m icplay``: the same as the ``icplay`` command."""

from icplay.cli import console

if __name__ == "__main__":
    console()
