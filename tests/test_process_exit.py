"""``icplay.process.exit_process``: a command that asked to skip the interpreter's teardown still
ends as a normal exit does (threads joined, atexit handlers run, buffered output written)."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import atexit, sys, threading, time
from icplay.process import exit_process, skip_teardown
atexit.register(lambda: print("atexit ran"))
threading.Thread(target=lambda: (time.sleep(0.2), print("thread ended"))).start()
sys.stdout.write("buffered, no newline")
if sys.argv[1] == "skip":
    skip_teardown()
exit_process(3)
"""


def test_an_exit_without_teardown_joins_threads_runs_atexit_and_flushes():
    for mode in ("skip", "normal"):
        done = subprocess.run([sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, timeout=60)
        assert done.returncode == 3, done.stderr
        assert done.stdout.startswith("buffered, no newline") and "thread ended" in done.stdout, done.stdout
        assert done.stdout.rstrip().endswith("atexit ran"), done.stdout
