"""Two threads on one SQLite episode — the runner's statement and the schema browser's
worker, as the play and watch screens do — must not deadlock.

Without the backend's lock this froze the whole process within seconds: a statement's
authorizer/progress callbacks wait for the GIL while SQLite holds the connection's mutex,
and the other thread waits for that mutex holding the GIL (the TUI hang of issue 9). A
deadlock holds the GIL, so the scenario runs in a child process that the test can time out.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SCENARIO = r"""
import threading, time
from icplay.sql.sqlite import SqliteBackend

backend = SqliteBackend()
backend.reset(None)
until = time.monotonic() + 4
done = [0, 0]

def statements():
    while time.monotonic() < until:
        assert backend.execute("SELECT * FROM books b1, books b2 LIMIT 200").error is None
        done[0] += 1

def schema():
    while time.monotonic() < until:
        assert backend.schema()
        done[1] += 1

threads = [threading.Thread(target=statements), threading.Thread(target=schema)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(done[0], done[1])
"""


def test_statements_and_the_schema_browser_on_two_threads_do_not_deadlock():
    done = subprocess.run([sys.executable, "-c", SCENARIO], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    statements, schemas = map(int, done.stdout.split())
    assert statements > 10 and schemas > 10     # both threads really ran, interleaved
