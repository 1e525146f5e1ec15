r"""Trajectory files: one JSON file per episode, replaced atomically after every turn.

Atomic means: write a temporary file in the same folder, flush and fsync it, then
``os.replace`` it over the old one. A reader (or a crash) sees either the previous
complete file or the new complete file, never half of one.

Encoding: files are UTF-8 JSON. A trajectory keeps what was typed, and an action may
hold bytes that are not UTF-8 (a terminal or a pipe in another encoding: Python reads them
as lone surrogates, ``\udc80``-``\udcff``, with ``surrogateescape``). UTF-8 cannot hold a
lone surrogate, so the JSON text writes every surrogate as a ``\uXXXX`` escape, which
JSON allows and ``json.loads`` turns back into the same code point: loading gives back
the very string that was saved. (One exception: a *pair* of surrogates that forms a valid
UTF-16 pair is read back as the one character it encodes.) Displays replace what they
cannot show (``printable``).
"""

from __future__ import annotations

import datetime
import decimal
import fcntl
import json
import os
import re
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

from icplay.episode import Trajectory
from icplay.json_shape import DuplicateKeyError, FieldError, JsonFileError, kind_of, read_json, read_json_bytes


class TrajectoryFileError(ValueError):
    """A trajectory file that cannot be read back; the message names the file."""


_SURROGATE = re.compile("[\ud800-\udfff]")   # any surrogate code point


def escape_surrogates(json_text: str) -> str:
    """JSON text with every lone surrogate written as a ``\\uXXXX`` escape (see the module
    docstring). Surrogates can only occur inside JSON strings, so this keeps it valid JSON."""
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", json_text)


def printable(text: str) -> str:
    """``text`` as a display can show it: lone surrogates become U+FFFD."""
    return _SURROGATE.sub("\ufffd", text)


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that readers see the old file or the new one, whole.

    Lone surrogates in ``text`` (undecodable bytes) are written with ``surrogateescape``,
    so the bytes they stood for land in the file as they were."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:   # even Ctrl+C: no temporary file left behind, the error re-raised
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def jsonable(value: object) -> object:
    """Values a database hands back that JSON lacks (DECIMAL, DATE, BLOB), kept as text."""
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, (datetime.date, datetime.time, datetime.datetime)):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", "replace")
    return str(value)


# A SQL turn's info carries its result rows for display; the observation already holds
# them as InterCode's string, so a file keeps only the first rows (resume re-executes).
SAVED_ROWS = 1000


def trajectory_json(trajectory: Trajectory) -> str:
    """The file text of a trajectory. indent=1 also keeps json on its pure-Python encoder,
    which lets other threads (the UI) run between chunks of a big result."""
    data = trajectory.to_dict()
    for turn in data["turns"]:
        rows = (turn.get("info") or {}).get("rows")
        if isinstance(rows, list) and len(rows) > SAVED_ROWS:
            turn["info"]["rows"] = rows[:SAVED_ROWS]
            turn["info"]["rows_saved"] = SAVED_ROWS
    return escape_surrogates(json.dumps(data, ensure_ascii=False, indent=1, default=jsonable))


def atomic_write_json(path: Path, data: object) -> None:
    atomic_write_text(path, escape_surrogates(json.dumps(data, ensure_ascii=False, indent=1, default=jsonable)))


def safe_name(text: str) -> str:
    """``text`` as one folder or file name: no separator, and never ``.``, ``..`` or a dot
    name (a task set named ``..`` must not climb out of the store)."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "task"
    return "_" + name if name.startswith(".") else name


def save_trajectory(trajectory: Trajectory, path: Path) -> None:
    atomic_write_text(Path(path), trajectory_json(trajectory))


def load_trajectory(path: str | Path) -> Trajectory:
    """The trajectory in ``path``; ``TrajectoryFileError`` (one sentence naming the file and,
    for a bad field, its path: ``12.json: turns[3].reward is a string, not a number``) if
    it cannot be used. Only a regular file is read (a FIFO or a device is refused without
    blocking); huge or deeply nested files are refused before parsing (``icplay.json_shape``)."""
    return read_trajectory(path)[0]


def read_trajectory(path: str | Path) -> tuple[Trajectory, bytes]:
    """``load_trajectory``, and the very bytes it was read from (a copy made of them is the
    file that was checked, not one swapped in after the check)."""
    path = Path(path)
    try:
        data, raw = read_json(path)
        return trajectory_from_json(data, path), raw
    except FileNotFoundError:
        raise TrajectoryFileError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise TrajectoryFileError(f"{path}: a folder, not a trajectory file") from None
    except JsonFileError as exc:
        raise TrajectoryFileError(str(exc)) from None
    except DuplicateKeyError as exc:
        raise TrajectoryFileError(f"{path}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise TrajectoryFileError(f"{path}: not a trajectory file, not JSON: {exc}") from None
    except UnicodeDecodeError as exc:
        raise TrajectoryFileError(f"{path}: not a trajectory file, not UTF-8 text: {exc.reason} at byte "
                                  f"{exc.start}") from None
    except OSError as exc:
        raise TrajectoryFileError(f"{path}: cannot be read ({exc.strerror or exc})") from None


def trajectory_from_json(data: object, path: str | Path) -> Trajectory:
    """A decoded trajectory file as a ``Trajectory``, or ``TrajectoryFileError`` naming the
    file and the first bad field."""
    if not isinstance(data, dict):
        raise TrajectoryFileError(f"{path}: not a trajectory file: its JSON is {kind_of(data)}, not an object")
    try:
        return Trajectory.from_dict(data)
    except FieldError as exc:
        raise TrajectoryFileError(f"{path}: {exc}") from None
    except (KeyError, TypeError, AttributeError, ValueError) as exc:     # a field check missed it
        raise TrajectoryFileError(f"{path}: not a trajectory file, a missing or bad field: {exc}") from None


# --- no overwritten trajectories ---------------------------------------------------------
#
# Two guarantees, for every writer that goes through a TrajectoryStore (the runner, the
# plain REPL, baseline sessions and the TUI):
#
# 1. One writer per trajectory file, across processes. The first save of an episode
#    *claims* its file: an exclusive ``flock`` on ``<root>/.locks/<set>/<id>.json.lock``, held until a
#    save records a final status (submitted, stopped, error) or the process ends (the
#    kernel drops the lock of a killed process, so no stale lock survives it). Another
#    process that claims the same file gets ``TrajectoryBusyError``, naming the file and
#    the pid that holds it. Within one process claims are shared by path: the app
#    coordinates its own threads.
# 2. A file is only ever replaced by a newer save of the *same* episode (same trajectory
#    id). When a new episode of the task is saved over a file holding another one (a
#    retry, a rerun of a stopped episode), the old file is first moved to the store's
#    attempts folder as ``<set>/<id>.<n>.json`` (n = 1, 2, ...; created exclusively, so two
#    archivers never pick the same n).
#
# A process that is stopped by a signal marks its open episodes (claimed, last saved as
# ``running``) ``stopped`` with ``stop_open_trajectories``.

FINAL_STATUSES = ("submitted", "stopped", "error")


class StoreError(RuntimeError):
    """A trajectory that cannot be written here; the message says why, in one line."""


class TrajectoryBusyError(StoreError):
    """Another icplay process has this trajectory open."""


class StoreWriteError(StoreError):
    """A save failed (a full disk, a read-only home): the episode cannot go on, and the file
    keeps its last complete save (the write is atomic). One sentence for the user."""

    def __init__(self, path: Path, exc: OSError, saved_turns: int):
        kept = (f"its {saved_turns} turn(s) saved before are kept" if saved_turns
                else "nothing of it was saved before")
        super().__init__(f"cannot save {path}: {exc.strerror or exc}; the episode is stopped and {kept} "
                         "(free some space or make the folder writable, then play the task again to resume)")
        self.path, self.saved_turns = path, saved_turns


@dataclass
class _Claim:
    path: Path
    fd: int
    store: "TrajectoryStore"
    trajectory: Trajectory | None = None
    saved_turns: int = 0      # turns in the file as last saved


_claims: dict[Path, _Claim] = {}
_claims_lock = threading.RLock()


def _lock_path(path: Path) -> Path:
    """``<root>/.locks/<set>/<id>.json.lock`` for ``<root>/<set>/<id>.json``: beside the
    store, not among its files."""
    return path.parent.parent / ".locks" / path.parent.name / f"{path.name}.lock"


def _claim(path: Path, store: "TrajectoryStore") -> _Claim:
    """This process's claim on ``path`` (taken now if it has none)."""
    key = path.resolve()
    with _claims_lock:
        claim = _claims.get(key)
        if claim is not None:
            return claim
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = _lock_path(path)
        lock.parent.mkdir(parents=True, exist_ok=True)
        while True:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "?"
                os.close(fd)
                raise TrajectoryBusyError(f"{path} is open in another icplay process (pid {holder}); finish it "
                                          "there, or use another session or --out") from None
            try:
                same = os.fstat(fd).st_ino == os.stat(lock).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)    # the holder removed this lock file as we opened it: take the new one
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        claim = _claims[key] = _Claim(path, fd, store)
        return claim


def _release(path: Path) -> None:
    with _claims_lock:
        claim = _claims.pop(path.resolve(), None)
    if claim is not None:
        try:
            os.unlink(_lock_path(claim.path))   # still locked: a waiter re-checks the inode
        except OSError:
            pass
        os.close(claim.fd)   # closing the descriptor drops the flock


def open_trajectories() -> list[Trajectory]:
    """The episodes this process has claimed and not yet saved with a final status."""
    with _claims_lock:
        return [c.trajectory for c in _claims.values() if c.trajectory is not None]


def stop_open_trajectories(error: str = "icplay was stopped") -> list[Path]:
    """Save every open episode of this process as ``stopped`` (a signal's shutdown path);
    returns their files. Errors writing one file do not keep the others from being saved."""
    with _claims_lock:
        claims = list(_claims.values())
    stopped = []
    for claim in claims:
        traj = claim.trajectory
        if traj is None or traj.status in FINAL_STATUSES:
            continue
        traj.status, traj.error = "stopped", error
        try:
            claim.store.save(traj)
            stopped.append(claim.path)
        except StoreError:   # a full disk, a folder gone: the other episodes are still saved
            pass
    return stopped


LEFT_RUNNING = ("icplay ended without closing this episode (pid {pid}: a full disk, a crash or a kill); "
                "found running and marked stopped when its folder was next opened")


def stop_abandoned(root: Path) -> list[Path]:
    """Mark ``stopped`` every episode under ``root`` last saved ``running`` whose process is
    gone; returns their files.

    A process that dies (SIGKILL, a full disk that stops it before its final save) leaves its
    claim's lock file behind, unlocked; a live one holds the lock. So only the files with a
    lock file are looked at, and one is fixed only while this process holds its lock: a
    live episode is never touched. A file that cannot be read or written stays as it is
    (a read-only home is fixed when it is writable again)."""
    locks = root / ".locks"
    if not locks.is_dir():
        return []
    fixed = []
    for lock in sorted(locks.glob("*/*.json.lock")):
        path = root / lock.parent.name / lock.name.removesuffix(".lock")
        with _claims_lock:
            if path.resolve() in _claims:
                continue           # this process's own open episode
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue           # held: its process is alive
            try:
                if os.fstat(fd).st_ino != os.stat(lock).st_ino:
                    continue       # released and replaced as we opened it: a new claim, not ours
            except FileNotFoundError:
                continue
            pid = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "?"
            outcome = _mark_stopped(path, LEFT_RUNNING.format(pid=pid))
            if outcome == "failed":
                continue           # still cannot write: the lock stays, for the next start to try
            if outcome == "fixed":
                fixed.append(path)
            try:
                os.unlink(lock)
            except OSError:
                pass
        finally:
            os.close(fd)
    return fixed


def _mark_stopped(path: Path, note: str) -> str:
    """One of: fixed (saved ``stopped`` with ``note``), failed (it could not be written) or
    left (gone, unreadable, or already final: nothing to fix)."""
    try:
        traj = load_trajectory(path)
    except TrajectoryFileError:
        return "left"
    if traj.status in FINAL_STATUSES:
        return "left"
    traj.status, traj.error = "stopped", note
    try:
        save_trajectory(traj, path)
    except OSError:
        return "failed"
    return "fixed"


class TrajectoryStore:
    """A folder of trajectories, one file per task (``<set>/<id>.json``), never overwritten
    by another episode and never written by two processes (see the comment above).

    ``attempts`` is where replaced episodes go; default ``<root's parent>/.attempts/<root's
    name>``, outside ``root`` so that ``icplay report`` on ``root`` counts each task once.
    """

    def __init__(self, root: str | Path, attempts: str | Path | None = None):
        self.root = Path(root)
        self.attempts_root = Path(attempts) if attempts is not None else self.root.parent / ".attempts" / self.root.name

    def stop_abandoned(self) -> list[Path]:
        """Episodes left ``running`` by a process that is gone, marked ``stopped`` with a note
        (``stop_abandoned``); a front end calls this as it opens the store."""
        return stop_abandoned(self.root)

    def path_for(self, trajectory: Trajectory) -> Path:
        task = trajectory.task
        return self.task_path(str(task.get("set", "")), str(task.get("id", "")))

    def task_path(self, set_name: str, task_id: str) -> Path:
        return self.root / safe_name(set_name) / f"{safe_name(task_id)}.json"

    def claim(self, set_name: str, task_id: str) -> Path:
        """Claim a task's file before opening an episode on it (``TrajectoryBusyError`` if
        another process has it open); the first save claims it anyway."""
        path = self.task_path(set_name, task_id)
        _claim(path, self)
        return path

    def release(self, set_name: str, task_id: str) -> None:
        """Give up this process's claim on a task's file (done with it without a final save)."""
        path = self.task_path(set_name, task_id)
        with _claims_lock:
            claim = _claims.get(path.resolve())
            if claim is not None and claim.trajectory is not None and claim.trajectory.status not in FINAL_STATUSES:
                return   # an open episode keeps its claim
        _release(path)

    def save(self, trajectory: Trajectory) -> None:
        path = self.path_for(trajectory)
        claim = _claim(path, self)
        with _claims_lock:
            if claim.trajectory is not trajectory:
                if claim.trajectory is None or claim.trajectory.id != trajectory.id:
                    self._archive_if_other(path, trajectory.id)
                    self._place_attempt(trajectory)
                claim.trajectory = trajectory
                claim.store = self
        try:
            save_trajectory(trajectory, path)
        except OSError as exc:
            raise StoreWriteError(path, exc, claim.saved_turns) from None
        claim.saved_turns = len(trajectory.turns)
        if trajectory.status in FINAL_STATUSES:
            _release(path)

    def _place_attempt(self, trajectory: Trajectory) -> None:
        """Number a task's new (or older, unnumbered) episode after the attempts kept before it,
        and mark it ``after_gold_seen`` when one of them by the same annotator had its gold shown."""
        task = trajectory.task
        earlier = self.attempt_paths(str(task.get("set", "")), str(task.get("id", "")))
        if trajectory.attempt is None:
            trajectory.attempt = len(earlier) + 1
        if not trajectory.after_gold_seen:
            trajectory.after_gold_seen = any(
                t.gold_seen_at is not None and t.annotator == trajectory.annotator
                for t in readable(earlier) if t.id != trajectory.id)

    def _archive_if_other(self, path: Path, episode_id: str) -> None:
        """Move the file away if it holds another episode than ``episode_id``."""
        if not path.exists():
            return
        try:
            on_disk = json.loads(read_json_bytes(path)).get("id")
        except (OSError, ValueError, AttributeError):
            on_disk = None    # unreadable: keep it too, never overwrite it
        if on_disk != episode_id:
            self.archive(path)

    def archive(self, path: Path) -> Path | None:
        """Move a task's file to ``attempts/<set>/<id>.<n>.json`` (the next free n)."""
        if not path.exists():
            return None
        folder = self.attempts_root / path.parent.name
        folder.mkdir(parents=True, exist_ok=True)
        n = 1
        while True:
            target = folder / f"{path.stem}.{n}.json"
            try:
                os.link(path, target)      # fails if target exists: n is never taken twice
            except FileExistsError:
                n += 1
                continue
            os.unlink(path)
            return target

    def attempt_paths(self, set_name: str, task_id: str) -> list[Path]:
        folder = self.attempts_root / safe_name(set_name)
        stem = safe_name(task_id)
        paths = [p for p in folder.glob(f"{stem}.*.json") if p.name[len(stem) + 1:-5].isdigit()]
        return sorted(paths, key=lambda p: int(p.name[len(stem) + 1:-5]))

    def attempts_of(self, set_name: str, task_id: str) -> list[Trajectory]:
        """Every readable attempt of a task, the kept ones and the current one, by attempt number."""
        current = self.task_path(set_name, task_id)
        return numbered_attempts(readable(self.attempt_paths(set_name, task_id)), readable([current], kept=False))

    def load_for(self, set_name: str, task_id: str) -> Trajectory | None:
        path = self.task_path(set_name, task_id)
        return load_trajectory(path) if path.exists() else None

    def __iter__(self) -> Iterator[Trajectory]:
        for path in sorted(self.root.rglob("*.json")):
            yield load_trajectory(path)


# --- attempts: every try of a task, numbered ---------------------------------------------
#
# A task's current file is its latest attempt; the earlier ones are the files the store moved
# to its attempts folder (``<set>/<id>.<n>.json``, n = 1, 2, ... in the order they were
# replaced). Files written before attempts were numbered get their number from that order.

ATTEMPT_NAME = re.compile(r"(?P<stem>.+)\.(?P<n>[0-9]+)\.json")


def readable(paths: Iterable[Path], skipped: list | None = None, kept: bool = True) -> list[Trajectory]:
    """The trajectories of ``paths`` that exist and can be read; the others are left out (and,
    with ``skipped``, added to it as ``TrajectoryFileError``s). ``kept``: the paths are kept
    attempts, whose name numbers an older, unnumbered one (a current file's name never does:
    task ``t.1`` is ``t.1.json``)."""
    out = []
    for path in paths:
        if not path.exists():
            continue
        try:
            traj = load_trajectory(path)
        except TrajectoryFileError as exc:
            if skipped is not None:
                skipped.append((path, exc))
            continue
        if kept and traj.attempt is None and (m := ATTEMPT_NAME.fullmatch(path.name)):
            traj.attempt = int(m["n"])
        out.append(traj)
    return out


def numbered_attempts(kept: list[Trajectory], current: list[Trajectory]) -> list[Trajectory]:
    """``kept`` then ``current`` in attempt order; an unnumbered current file comes last."""
    for traj in current:
        if traj.attempt is None:
            traj.attempt = max((t.attempt or 0 for t in kept), default=0) + 1
    return sorted(kept + current, key=lambda t: t.attempt or 0)


def attempts_folders(root: Path) -> list[Path]:
    """Where a trajectory folder's replaced attempts are kept: a store's ``<parent>/.attempts/<name>``,
    and for a session folder (``<home>/trajectories/<name>``) ``<home>/attempts/<name>``."""
    root = Path(root)
    candidates = [root.parent / ".attempts" / root.name]
    if root.parent.name == "trajectories":
        candidates.append(root.parent.parent / "attempts" / root.name)
    return [c for c in candidates if c.is_dir()]
