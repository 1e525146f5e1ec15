"""A stand-in for a seat's app process, for the relay tests: it reports what a seat's process
gets (its environment, its open files, the screen size, every meta packet textual-serve
writes to its stdin) as JSON lines to the file named by argv[1], and quits when asked (the
``quit`` meta packet) as the real app does. ``crash`` as argv[2]: it writes a traceback with
a secret in it to stderr and exits at once, as an app that fails would."""

from __future__ import annotations

import json
import os
import sys


def report(out, **fields) -> None:
    out.write(json.dumps(fields) + "\n")
    out.flush()


def open_files() -> list[str]:
    """What this process's descriptors 3 and up point at (0-2 are textual-serve's pipes)."""
    found = []
    for fd in (fd for fd in os.listdir("/proc/self/fd") if int(fd) > 2):
        try:
            found.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:         # the listing's own descriptor, closed by now
            continue
    return found


def main() -> None:
    with open(sys.argv[1], "a", encoding="utf-8") as out:
        report(out, env=dict(os.environ), files=open_files())
        if sys.argv[2:] == ["crash"]:
            sys.stderr.write('Traceback (most recent call last):\n  File "/srv/secret/app.py"\nKeyError: sk-secret\n')
            sys.exit(1)
        stdin = sys.stdin.buffer
        while (kind := stdin.read(1)):
            size = int.from_bytes(stdin.read(4), "big")
            payload = stdin.read(size)
            if kind == b"M":
                meta = json.loads(payload)
                report(out, meta=meta)
                if meta.get("type") == "quit":
                    return
            else:
                report(out, data=payload.decode("utf-8", "replace"))


if __name__ == "__main__":
    main()
