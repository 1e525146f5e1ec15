"""Seats: the tokens that let one annotator (or a supervisor) into ``icplay serve``.

A token is 32 random bytes (``secrets.token_urlsafe``), shown once when it is made and
stored only as its SHA-256 digest, beside the study (``<study>/seats.json``, mode 0600),
with the seat it opens: the annotator's name, or a supervisor's. Whoever reads that file
learns who has a seat, not how to take one.

Why SHA-256 and not a slow password hash (scrypt, argon2): a slow hash protects secrets a
person chose, which are few enough to guess. A token of 256 random bits cannot be guessed
whatever the hash costs, so a fast one-way digest keeps a stolen file useless, and checking
a request stays cheap (every request of the browser seat is checked). Digests are compared
with ``hmac.compare_digest`` against every stored seat, so the time a check takes does not
tell how much of a digest matched, nor which seat was compared last.
"""

from __future__ import annotations

import fcntl
import hashlib
import hmac
import json
import os
import re
import secrets
import stat
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

TOKEN_BYTES = 32
SEATS_FILE = "seats.json"
ANNOTATOR, SUPERVISOR = "annotator", "supervisor"
ROLES = (ANNOTATOR, SUPERVISOR)
_DIGEST = re.compile(r"[0-9a-f]{64}")


class SeatFileError(ValueError):
    """A seats file icplay cannot use, in one sentence naming the file and the field."""


@dataclass(frozen=True)
class Seat:
    """Who a token lets in: ``name`` (the annotator recorded in the trajectories, or the
    supervisor's name) and ``role`` (``annotator`` plays their queue, ``supervisor`` only
    watches)."""

    name: str
    role: str = ANNOTATOR


@dataclass(frozen=True)
class _Stored:
    seat: Seat
    digest: str          # hex SHA-256 of the token
    made: str


def digest_of(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


class Seats:
    """The seats of one study, as stored in ``path``: make tokens, find the seat of one."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._text: bytes | None = None
        self._stored: list[_Stored] = []
        self.reload()

    def reload(self) -> None:
        """Read the file again if its bytes changed (a token made or revoked by ``icplay serve
        tokens`` while the server runs counts at the next request); SeatFileError if it is bad.
        The bytes are compared, not the file's time and size: a rewrite within one clock tick
        keeps those, and a revoked token must not live on because of it."""
        text = self._bytes()
        if text != self._text:
            self._stored, self._text = self._parse(text), text

    def _bytes(self) -> bytes | None:
        try:
            with open(self.path, "rb") as file:
                mode, text = os.fstat(file.fileno()).st_mode, file.read()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise SeatFileError(f"{self.path}: cannot read the seats ({exc})") from None
        if mode & 0o022:                # whoever may write it may give themselves a seat
            raise SeatFileError(f"{self.path}: others may write the seats (mode {stat.S_IMODE(mode):o}); "
                                f"make it the owner's alone: chmod 600 {self.path}")
        return text

    def _parse(self, text: bytes | None) -> list[_Stored]:
        if text is None:
            return []
        try:
            data = json.loads(text.decode("utf-8"))
        except ValueError as exc:
            raise SeatFileError(f"{self.path}: cannot read the seats ({exc})") from None
        records = data.get("seats") if isinstance(data, dict) else None
        if not isinstance(records, list):
            raise SeatFileError(f"{self.path}: field 'seats' must be a list")
        return [self._record(n, record) for n, record in enumerate(records)]

    def _record(self, n: int, record: object) -> _Stored:
        where = f"{self.path}: seats[{n}]"
        if not isinstance(record, dict):
            raise SeatFileError(f"{where} must be a table of name, role and sha256")
        name, role, digest = record.get("name"), record.get("role", ANNOTATOR), record.get("sha256")
        if not isinstance(name, str) or not name.strip():
            raise SeatFileError(f"{where}: field 'name' must be a non-empty string")
        if role not in ROLES:
            raise SeatFileError(f"{where}: field 'role' must be one of {', '.join(ROLES)}")
        if not isinstance(digest, str) or not _DIGEST.fullmatch(digest):
            raise SeatFileError(f"{where}: field 'sha256' must be 64 hexadecimal digits")
        return _Stored(Seat(name, role), digest, str(record.get("made", "")))

    @property
    def seats(self) -> list[Seat]:
        return [s.seat for s in self._stored]

    def issue(self, name: str, role: str = ANNOTATOR) -> str:
        """A new token for ``name``'s seat, saved hashed; any older token of that seat stops
        working (making a token again is how a lost or leaked one is revoked). The token is
        returned once and kept nowhere."""
        if role not in ROLES:
            raise ValueError(f"a seat's role is one of {', '.join(ROLES)}, not {role!r}")
        token = secrets.token_urlsafe(TOKEN_BYTES)
        seat = Seat(name, role)
        made = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        with self._locked():            # two `serve tokens` at once: neither undoes the other's revoking
            self.reload()
            self._stored = [s for s in self._stored if s.seat != seat] + [_Stored(seat, digest_of(token), made)]
            self._write()
            self.reload()
        return token

    def seat_of(self, token: str | None) -> Seat | None:
        """The seat ``token`` opens, or None. Every stored digest is compared, in constant
        time each, whatever matched earlier. The file is read again if it changed."""
        self.reload()
        if not token or len(token) > 256:
            return None
        presented = digest_of(token)
        found = None
        for stored in self._stored:
            if hmac.compare_digest(presented, stored.digest):
                found = stored.seat
        return found

    @contextmanager
    def _locked(self):
        """An exclusive lock beside the file, held while it is read, changed and replaced."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path.with_name(self.path.name + ".lock"), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _write(self) -> None:
        """Replace the file at once, mode 0600 whatever the umask or a file left there: a
        temporary file of its own (created exclusively, never through a symlink) renamed over it."""
        records = [{"name": s.seat.name, "role": s.seat.role, "sha256": s.digest, "made": s.made}
                   for s in self._stored]
        fd, temporary = tempfile.mkstemp(prefix=self.path.name + ".", suffix=".tmp", dir=self.path.parent)
        try:
            os.fchmod(fd, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump({"seats": records}, out, indent=1)
                out.write("\n")
            os.replace(temporary, self.path)
        except BaseException:   # even Ctrl+C: no temporary file left behind, the error re-raised
            Path(temporary).unlink(missing_ok=True)
            raise
