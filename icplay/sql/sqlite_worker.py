"""The SQLite episode's own process: a solver's statements never run in icplay's.

SQLite keeps some state per process (heap limits, the temporary-file folder), and a
statement may allocate as much memory as it likes (temporary tables, sorts, huge values).
In icplay's process that reached every other episode and icplay itself. So an episode's
connections live in a worker process, one episode at a time (``sqlite_pool`` keeps them
warm and lends one to each backend from its reset to its close), and:

- its memory is bounded in bytes: SQLite's hard heap limit (``HEAP_BYTES``: every
  database copy, temporary table, sort and cache of the episode) and the process's
  address space (``ADDRESS_SPACE``: Python's share, such as a fetched row); it writes
  no file (``RLIMIT_FSIZE`` 0; temporary storage is in memory);
- running out of memory, or any other failure inside a statement, is that statement's
  error; if the worker dies anyway, the backend starts another on a pristine copy and
  the statement's observation says so;
- between two episodes every connection is closed (with it its pragmas, temporary
  tables and limits: nothing a statement sets outlives its connection), and a worker whose
  process-wide SQLite settings moved (they cannot, the authorizer refuses the pragmas, but
  it is checked at every reset) or whose memory ever passed ``RECYCLE_PEAK`` beyond its
  images is replaced;
- it keeps pristine images of the databases it was sent (read-only bytes: each episode
  opens its own copy), at most ``IMAGE_BUDGET`` bytes of them, the oldest forgotten first;
- what comes back is plain data (rows of numbers, strings, bytes, decimals, dates),
  read with an unpickler that builds nothing else, capped in bytes (``CappedRows``).

The protocol: length-prefixed pickles on the worker's stdin / stdout, one request and
one reply at a time. Gold queries never run here: the backend runs them in icplay's own
process on a copy no statement of the solver touched.
"""

from __future__ import annotations

import datetime
import decimal
import io
import os
import pickle
import select
import signal
import sqlite3
import struct
import subprocess
import sys
import threading
import time
from typing import IO, Any, Callable

from icplay.sql.base import CappedRows
from icplay.sql.sqlite_guard import Deadline
from icplay.sql.sqlite_guard import HEAP_BYTES, OUT_OF_MEMORY   # light: the worker never imports sqlglot
from icplay.sql.sqlite_guard import confine, episode_connection
from icplay.sql.sqlite_guard import run_statement

ADDRESS_SPACE = 1024 << 20      # the worker's whole address space
IMAGE_BUDGET = 128 << 20        # pristine database images one worker keeps
RECYCLE_PEAK = 160 << 20        # a worker whose resident memory ever passed this is not lent again
MAX_REPLY = 64 << 20            # a reply longer than this means a broken worker
START_TIMEOUT = 30.0
_HEADER = struct.Struct("!Q")


class WorkerLost(Exception):
    """The worker died or stopped answering; the message says how."""


# --- plain data across the pipe ---------------------------------------------------------

_ALLOWED = {("decimal", "Decimal"), ("datetime", "datetime"), ("datetime", "date"), ("datetime", "time"),
            ("datetime", "timedelta"), ("datetime", "timezone")}


class _PlainUnpickler(pickle.Unpickler):
    """Builds containers, numbers, strings, bytes, decimals and dates; nothing else."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _ALLOWED:
            return getattr({"decimal": decimal, "datetime": datetime}[module], name)
        raise pickle.UnpicklingError(f"the SQLite worker sent a {module}.{name}, which is not plain data")


def _fd(pipe: IO[bytes] | None) -> int:
    """The descriptor of one of the worker's pipes (always made: stdin and stdout are PIPE)."""
    assert pipe is not None
    return pipe.fileno()


def _send(fd: int, message: Any) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(_HEADER.pack(len(data)) + data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _read_exactly(fd: int, size: int, deadline: float | None) -> bytes:
    chunks, left = [], size
    while left:
        if deadline is not None:
            wait = deadline - time.monotonic()
            if wait <= 0 or not select.select([fd], [], [], wait)[0]:
                raise TimeoutError
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _receive(fd: int, deadline: float | None = None, plain: bool = False) -> Any:
    (size,) = _HEADER.unpack(_read_exactly(fd, _HEADER.size, deadline))
    if size > MAX_REPLY:
        raise WorkerLost(f"the SQLite worker sent a reply of {size} bytes")
    data = _read_exactly(fd, size, deadline)
    if plain:
        return _PlainUnpickler(io.BytesIO(data)).load()
    return pickle.loads(data)


# --- the worker's side ------------------------------------------------------------------

class _Worker:
    """The episode's connections inside the worker process."""

    def __init__(self) -> None:
        self.images: dict[str, bytes] = {}
        self.conns: dict[str, sqlite3.Connection] = {}
        self.guards: dict[str, Any] = {}
        self.current: str | None = None
        self.deadline = Deadline()
        self.control = sqlite3.connect(":memory:")
        self.control.execute(f"PRAGMA hard_heap_limit = {HEAP_BYTES}")
        self.settings = self._settings()

    def _settings(self) -> tuple[Any, ...]:
        """SQLite's process-wide settings a statement could have moved (heap limits, folders)."""
        return tuple(self.control.execute(f"PRAGMA {name}").fetchall()
                     for name in ("hard_heap_limit", "soft_heap_limit", "temp_store_directory", "data_store_directory"))

    def settings_hold(self) -> bool:
        """Are the process-wide SQLite settings still icplay's?"""
        return self._settings() == self.settings

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        op = request["op"]
        if op == "image":
            for key in request.get("forget", ()):
                self.images.pop(key, None)
            self.images[request["key"]] = request["data"]
            return {}
        if op == "reset":
            for conn in self.conns.values():
                conn.close()
            self.conns.clear()
            self.guards.clear()
            self.current = None
            if not self.settings_hold():
                return {"replace": True}
            if request.get("key"):
                return self.open(request["key"])
            return {"peak": _peak_bytes()}
        if op == "open":
            return self.open(request["key"])
        if op == "execute":
            return self.execute(request["sql"], request["timeout"], request["max_rows"])
        if op == "schema":
            return {"tables": self.schema()}
        if op == "table_info":
            assert self.current is not None
            conn = self.conns[self.current]
            return {"info": conn.execute(f'PRAGMA table_info("{request["table"]}")').fetchall()}
        raise ValueError(f"unknown request {op!r}")

    def open(self, key: str) -> dict[str, Any]:
        """Make ``key``'s copy the current database (a fresh copy of its image if new)."""
        if key not in self.conns:
            conn = episode_connection()
            try:
                conn.deserialize(self.images[key])
            except MemoryError:
                conn.close()
                return {"error": OUT_OF_MEMORY}
            self.guards[key] = confine(conn, self.deadline)
            self.conns[key] = conn
        self.current = key
        return {}

    def execute(self, sql: str, timeout: float | None, max_rows: int | None) -> dict[str, Any]:
        assert self.current is not None

        result = run_statement(self.conns[self.current], sql, self.deadline, timeout, self.guards[self.current],
                               lambda cursor, result: CappedRows(max_rows).read(cursor.fetchmany).fill(result))
        return {"result": result.__dict__}

    def schema(self) -> list[tuple[str, list[tuple[str, str]]]]:
        conn = self.conns.get(self.current or "")
        if conn is None:
            return []
        names = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') "
            "AND name NOT LIKE 'sqlite_%' ORDER BY name")]
        return [(name, [(c[1], c[2]) for c in conn.execute(f'PRAGMA table_info("{name}")')]) for name in names]


def _peak_bytes() -> int:
    """The process's peak resident memory (VmHWM), 0 where /proc does not tell."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0


def _limit_self() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def main() -> int:
    """The worker's loop: one request, one reply, until stdin closes."""
    stdin, stdout = sys.stdin.fileno(), sys.stdout.fileno()
    sys.stdout = sys.stderr   # nothing but replies on the pipe
    worker = _Worker()
    signal.signal(signal.SIGUSR1, lambda *_: setattr(worker.deadline, "interrupted", True))
    _limit_self()
    _send(stdout, {"ready": os.getpid()})
    while True:
        try:
            request = _receive(stdin)
        except EOFError:
            return 0
        try:
            reply = worker.handle(request)
        except MemoryError:
            reply = {"error": OUT_OF_MEMORY}
        except Exception as exc:   # a bug here must not end the episode: say it, keep serving
            reply = {"error": f"{type(exc).__name__}: {exc}"}
        try:
            _send(stdout, reply)
        except MemoryError:
            _send(stdout, {"error": OUT_OF_MEMORY})


# --- icplay's side ----------------------------------------------------------------------

class WorkerClient:
    """icplay's handle on one worker process: requests with a deadline, interrupts.

    ``lease`` counts the episodes it served: an interrupt names the lease it was meant
    for, so one arriving late never stops the next borrower's statement. A client made
    before a ``fork`` is dead in the child (the process belongs to the parent)."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self.images: dict[str, int] = {}     # key -> bytes, oldest first
        self.lease = 0
        self._signal_lock = threading.Lock()
        self._in_flight = False
        self._owner = os.getpid()

    def start(self) -> None:
        self._owner = os.getpid()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "icplay.sql.sqlite_worker"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, close_fds=True, start_new_session=True)
        self.images = {}
        try:
            ready = _receive(_fd(self.proc.stdout), time.monotonic() + START_TIMEOUT, plain=True)
        except (EOFError, TimeoutError, WorkerLost, pickle.UnpicklingError) as exc:
            self.stop()
            raise WorkerLost(f"the SQLite worker process did not start ({type(exc).__name__})") from None
        if not isinstance(ready, dict) or "ready" not in ready:
            self.stop()
            raise WorkerLost("the SQLite worker process did not start")

    @property
    def alive(self) -> bool:
        if self.proc is not None and self._owner != os.getpid():
            self._disown()
        return self.proc is not None and self.proc.poll() is None

    def _disown(self) -> None:
        """In a forked child: forget the parent's process (never signal it), close our
        copies of its pipes so it still sees the parent's end of them."""
        proc, self.proc = self.proc, None
        self.images = {}
        if proc is not None:
            proc.returncode = 0     # not ours to wait for
            _close_pipes(proc)

    def request(self, message: dict[str, Any], timeout: float | None = None) -> dict[str, Any]:
        """Send one request and wait for its reply (at most ``timeout`` seconds)."""
        if not self.alive:
            self.start()
        assert self.proc is not None
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._signal_lock:
            self._in_flight = True
        try:
            try:
                _send(_fd(self.proc.stdin), message)
                reply = _receive(_fd(self.proc.stdout), deadline, plain=True)
            except (BrokenPipeError, EOFError):
                try:   # the pipe closes as the process dies: wait the moment until it is reaped
                    code = self.proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    code = None
                self.stop()
                raise WorkerLost(_ended(code)) from None
            except TimeoutError:
                self.stop()
                raise WorkerLost("the statement did not stop at its timeout, so its database process was "
                                 "stopped") from None
            except (pickle.UnpicklingError, WorkerLost, ValueError) as exc:
                self.stop()
                raise WorkerLost(f"the database process sent a reply icplay does not accept ({exc})") from None
        finally:
            with self._signal_lock:
                self._in_flight = False
        if not isinstance(reply, dict):
            self.stop()
            raise WorkerLost("the database process sent a reply icplay does not accept")
        return reply

    def send_image(self, key: str, data: Callable[[], bytes]) -> None:
        """Make sure the worker holds ``key``'s image (``data()`` makes it if not), within
        ``IMAGE_BUDGET``: the images it holds longest are forgotten first."""
        if key in self.images:
            self.images[key] = self.images.pop(key)   # newest again
            return
        image = data()
        forget = []
        while self.images and sum(self.images.values()) + len(image) > IMAGE_BUDGET:
            oldest = next(iter(self.images))
            forget.append(oldest)
            del self.images[oldest]
        self.request({"op": "image", "key": key, "data": image, "forget": forget}, timeout=START_TIMEOUT)
        self.images[key] = len(image)

    def next_lease(self) -> int:
        """A new borrower: interrupts meant for the last one no longer reach the worker."""
        with self._signal_lock:
            self.lease += 1
            return self.lease

    def interrupt(self, lease: int | None = None) -> None:
        """Stop the running statement, if one is running (any thread) and the worker is
        still lent as ``lease`` (None: whoever holds it)."""
        with self._signal_lock:
            proc = self.proc
            if lease is not None and lease != self.lease:
                return
            if self._in_flight and proc is not None and proc.poll() is None:
                try:
                    os.kill(proc.pid, signal.SIGUSR1)
                except ProcessLookupError:
                    pass

    def stop(self) -> None:
        if self._owner != os.getpid():
            self._disown()
            return
        proc, self.proc = self.proc, None
        self.images = {}
        if proc is None:
            return
        try:
            proc.kill()
        except ProcessLookupError:
            pass
        proc.wait()
        _close_pipes(proc)


def _close_pipes(proc: subprocess.Popen[bytes]) -> None:
    for pipe in (proc.stdin, proc.stdout):
        try:
            if pipe is not None:
                pipe.close()
        except OSError:
            pass


def _ended(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"the database process was killed ({name}, most likely out of memory)"
    return f"the database process ended (exit status {code})"


if __name__ == "__main__":
    sys.exit(main())
