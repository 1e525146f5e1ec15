"""icplay.threads.Worker: the main thread's wait for a worker survives a KeyboardInterrupt.

On Python 3.11 an interrupted ``Thread.join`` marks the joined thread stopped although it
runs on; ``icplay run`` then exited under a running episode (its last container refused:
the episode saved as an error instead of stopped, 1 run in ~15 of tests/test_signals.py).
Each case runs in a child process that interrupts itself while it waits."""

from __future__ import annotations

import subprocess
import sys

from terminal_signals import sigint_as_from_a_terminal

CHILD = r"""
import os, signal, sys, threading, time
from icplay.threads import Worker

release = threading.Event()
worker = Worker(release.wait, name="slow") if sys.argv[1] == "worker" else \
    threading.Thread(target=release.wait, daemon=True)
worker.start()
try:
    threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT)).start()   # it lands inside the try
    while True:
        if sys.argv[1] == "worker":
            worker.wait(timeout=0.2)
        else:
            worker.join(timeout=0.2)
except KeyboardInterrupt:
    pass
running = worker.running() if sys.argv[1] == "worker" else worker.is_alive()
release.set()
print("running" if running else "ended")
"""


def after_interrupt(kind: str) -> str:
    done = subprocess.run([sys.executable, "-c", CHILD, kind], capture_output=True, text=True, timeout=60,
                          preexec_fn=sigint_as_from_a_terminal)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_worker_interrupted_while_waited_for_still_counts_as_running():
    assert after_interrupt("worker") == "running"

