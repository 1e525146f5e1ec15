"""Episode summaries: one small record per saved episode, for browsing thousands of them.

A browser (``icplay view``) needs the row of every episode — set, task, who, author mix,
turns, rewards, time worked, date — but not its turns. Reading 5 000 trajectory files in
full at every start is what makes viewers slow, so summaries are kept in an index file
(``$ICPLAY_HOME/.cache/view-index.json``) keyed by path, and a file is parsed again only
when its modification time or size changed. ``scan`` returns the summaries of every
episode under some paths (default: the home's sessions, runs and earlier attempts);
``load_episode`` reads one in full when it is opened.

InterCode results and log files hold many episodes: each becomes a summary whose ``ref``
is ``<file>#<n>``.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from icplay.episode import HUMAN, Trajectory, annotator_label
from icplay.formats import intercode
from icplay.formats.native import RUN_FILE, Skipped, file_trajectory, is_trajectory, load_logs, trajectory_folders
from icplay.paths import home_dir
from icplay.scan.registry import flag_kinds, names as scanner_names
from icplay.store import TrajectoryFileError, atomic_write_text, load_trajectory
from icplay.tasks.model import TaskFileError

INDEX_VERSION = 6    # 3: the strict verdict; 4: why a file was skipped; 5: annotator and attempt; 6: flags
MIX_LETTERS = (("agent", "A"), ("edited", "E"), ("human", "H"), ("rejected", "R"), ("invalid", "I"))


@dataclass
class EpisodeSummary:
    """What a table row needs about one episode (never its turns)."""

    ref: str                      # the file, or ``<file>#<n>`` for an episode inside an InterCode file
    id: str = ""
    set: str = ""
    task: str = ""
    env: str = ""
    query: str = ""
    who: str = ""                 # annotator (human) or model/strategy (agent)
    kind: str = ""                # policy kind: human, llm, replay, gold, intercode-...
    model: str = ""
    author: str = ""              # human | agent | mixed (who made the turns)
    mix: dict[str, int] = field(default_factory=dict)
    turns: int = 0
    best: float | None = None
    final: float | None = None
    solved: bool = False
    strict: bool | None = None    # the strict verdict (Trajectory.strictly_solved); None: no verdict
    status: str = ""
    time_worked: float = 0.0
    date: float = 0.0             # last saved (epoch seconds)
    source: str = ""              # the session or run folder it came from
    forked_from: dict[str, Any] | None = None
    annotator: str | None = None  # who played or supervised (None: no annotator was set)
    attempt: int | None = None    # which attempt of its task this is (None: recorded before attempts were)
    after_gold_seen: bool = False
    flags: list[str] = field(default_factory=list)   # the kinds of flag the scanners raise (icplay.scan)

    @property
    def mix_text(self) -> str:
        """The author mix in letters: ``A3 E1 R1`` (agent, edited, human, rejected, invalid)."""
        return " ".join(f"{letter}{self.mix[k]}" for k, letter in MIX_LETTERS if self.mix.get(k))

    def haystack(self) -> str:
        """The text a search matches (lowercase; computed once)."""
        hay = self.__dict__.get("_haystack")
        if hay is None:
            hay = self.__dict__["_haystack"] = " ".join((self.set, self.task, self.env, self.who, self.model,
                                                         self.source, self.status, self.id, self.query)).lower()
        return hay


FIELDS = tuple(EpisodeSummary.__dataclass_fields__)    # the index keeps a summary as a list in this order


def _best(traj: Trajectory) -> float | None:
    return traj.best_reward if traj.best_reward is not None else traj.reward


def _date(traj: Trajectory) -> float:
    """When the episode was last written (else started)."""
    return traj.updated_at or traj.started_at or 0.0


def summarize(traj: Trajectory, ref: str, source: str = "") -> EpisodeSummary:
    policy = traj.policy or {}
    kind = str(policy.get("kind") or "human")
    model = str(policy.get("model") or "")
    who = annotator_label(traj.annotator) if kind == "human" else _who(policy, kind, model, source)
    mix = {k: v for k, v in traj.author_mix().items() if v}
    author = _author(kind, mix)
    return EpisodeSummary(
        ref=ref, id=traj.id, set=str(traj.task.get("set", "")), task=str(traj.task.get("id", "")), env=traj.env,
        query=str(traj.task.get("query") or "")[:300], who=who, kind=kind, model=model, author=author, mix=mix,
        turns=traj.turns_taken, best=_best(traj),
        final=traj.reward, solved=traj.solved, strict=traj.strictly_solved, status=traj.status,
        time_worked=traj.time_worked or 0.0,
        date=_date(traj), source=source, forked_from=traj.forked_from,
        annotator=traj.annotator, attempt=traj.attempt, after_gold_seen=traj.after_gold_seen,
        flags=flag_kinds(traj))


def _who(policy: dict, kind: str, model: str, source: str) -> str:
    """Who played an agent's episode: the model and strategy, or the policy (a human's episode
    is its annotator's)."""
    if kind == "llm":
        return "/".join(x for x in (model, str(policy.get("strategy") or "")) if x)
    return "/".join(x for x in (kind, model) if x)


def _author(kind: str, mix: dict[str, int]) -> str:
    """human, agent or mixed, from the turns' kinds."""
    human = mix.get("human", 0) + mix.get("edited", 0) + mix.get("rejected", 0)
    agent = mix.get("agent", 0) + mix.get("edited", 0) + mix.get("invalid", 0)
    if kind == "human" and not agent:
        return HUMAN
    return "mixed" if human else "agent"


def default_paths(home: str | Path | None = None) -> list[Path]:
    """Everything saved under the home: sessions, runs, and the attempts they replaced."""
    home = Path(home or home_dir())
    paths = trajectory_folders(home)
    attempts = home / "attempts"
    if attempts.is_dir():
        paths += sorted(p for p in attempts.iterdir() if p.is_dir())
    return paths


def _episode_files(entries: list[os.DirEntry], folders: list[str]) -> list[os.DirEntry]:
    """A folder's JSON files (not run.json) in order; its subfolders go on ``folders``. Dot
    entries (locks) and entries that vanish while read are skipped."""
    files = []
    for entry in entries:
        name = entry.name
        if name.startswith("."):
            continue
        try:
            if entry.is_dir():
                folders.append(entry.path)
            elif (name.endswith(".json") or name.endswith(".jsonl")) and name != RUN_FILE:
                files.append(entry)
        except OSError:
            continue
    return files


def _files(root: Path) -> Iterable[tuple[str, str, os.stat_result]]:
    """(file, source, stat) for every JSON file under ``root``, skipping dot folders (locks)
    and run.json. Plain strings and ``os.scandir``: at thousands of files pathlib's own
    overhead is most of the time a warm scan takes."""
    if root.is_file():
        yield str(root), root.parent.name, root.stat()
        return
    source = root.name if root.parent.name != "attempts" else f"attempts/{root.name}"
    stack = [str(root)]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name, reverse=True)
        except OSError:
            continue
        for entry in reversed(_episode_files(entries, stack)):
            try:
                yield entry.path, source, entry.stat()
            except OSError:
                continue


def _read(path: Path, source: str) -> tuple[list[EpisodeSummary], str | None]:
    """The summaries of one file, and why it cannot be used (None when it can)."""
    try:
        data = intercode.load_json_or_jsonl(path)
        if intercode.is_intercode(data) and not is_trajectory(data):
            trajs, _ = load_logs(path)
            return [summarize(t, f"{path}#{n}", source) for n, t in enumerate(trajs)], None
        return [summarize(file_trajectory(data, path), str(path), source)], None
    except (TrajectoryFileError, TaskFileError) as exc:
        return [], Skipped.of(path, exc).reason


class SummaryIndex:
    """Summaries cached by file (modification time and size) in one JSON file."""

    def __init__(self, cache: str | Path | None):
        self.cache = Path(cache) if cache is not None else None
        self.entries: dict[str, list] = {}
        self.changed = False
        if self.cache is not None and self.cache.is_file():
            try:
                data = json.loads(self.cache.read_text(encoding="utf-8"))
                if data.get("version") == INDEX_VERSION and data.get("scanners") == scanner_names():
                    self.entries = data.get("files") or {}
            except (OSError, ValueError, AttributeError):
                self.entries = {}

    def summaries(self, key: str, source: str, st: os.stat_result,
                  skipped: list[Skipped] | None = None) -> list[EpisodeSummary]:
        """The file's summaries; a file that cannot be used is added to ``skipped`` (its reason
        is kept in the index too, so a warm scan still names it)."""
        entry = self.entries.get(key)
        if entry is not None and entry[0] == st.st_mtime_ns and entry[1] == st.st_size:
            out, reason = [EpisodeSummary(*row) for row in entry[2]], entry[3]
        else:
            out, reason = _read(Path(key), source)
            self.entries[key] = [st.st_mtime_ns, st.st_size, [[getattr(s, f) for f in FIELDS] for s in out], reason]
            self.changed = True
        if reason is not None and skipped is not None:
            skipped.append(Skipped(key, reason))
        return out

    def save(self, seen: set[str] | None = None) -> None:
        if seen is not None and len(self.entries) != len(seen):    # files gone since: drop them
            self.entries = {k: v for k, v in self.entries.items() if k in seen}
            self.changed = True
        if self.cache is None or not self.changed:
            return
        try:
            atomic_write_text(self.cache, json.dumps({"version": INDEX_VERSION, "scanners": scanner_names(),
                                                       "files": self.entries}))
        except OSError:
            pass    # a read-only home still browses, it just parses again next time


def index_path(home: str | Path | None = None) -> Path:
    return Path(home or home_dir()) / ".cache" / "view-index.json"


def scan(paths: Iterable[str | Path] | None = None, home: str | Path | None = None,
         cache: str | Path | None | bool = True, skipped: list[Skipped] | None = None) -> list[EpisodeSummary]:
    """Every episode under ``paths`` (default ``default_paths(home)``), newest first.

    ``cache``: True for the home's index file, a path for another, False for none.
    A path that does not exist raises ``TrajectoryFileError`` (one line); a file that
    cannot be used is added to ``skipped`` (file and why) and the others are read."""
    out = [s for batch in scan_batches(paths, home, cache, skipped=skipped) for s in batch]
    out.sort(key=lambda s: s.date, reverse=True)
    return out


def _existing_roots(paths: Iterable[str | Path] | None, home: str | Path | None) -> list[Path]:
    """The folders and files to scan (default: everything under the home), each checked to exist."""
    roots = [Path(p) for p in paths] if paths else default_paths(home)
    for root in roots:
        if not root.exists():
            raise TrajectoryFileError(f"{root}: no such file or folder")
    return roots


def scan_batches(paths: Iterable[str | Path] | None = None, home: str | Path | None = None,
                 cache: str | Path | None | bool = True, every: float = 0.2,
                 clock: Callable[[], float] = time.monotonic,
                 skipped: list[Skipped] | None = None) -> Iterator[list[EpisodeSummary]]:
    """``scan``'s episodes in batches as the files are read (in no order): a batch every
    ``every`` seconds of reading, and the rest at the end — so that a first scan of thousands
    of new files (each parsed) shows rows while it goes on; a warm index comes in one batch.
    The index is saved once every file was read (a scan given up halfway saves nothing)."""
    roots = _existing_roots(paths, home)
    index = SummaryIndex(index_path(home) if cache is True else (cache or None))
    batch: list[EpisodeSummary] = []
    seen: set[str] = set()
    due = clock() + every
    for root in roots:
        for key, source, st in _files(root):
            if key in seen:
                continue
            seen.add(key)
            batch.extend(index.summaries(key, source, st, skipped))
            if batch and clock() >= due:
                yield batch
                batch, due = [], clock() + every
    index.save(seen if not paths else None)
    yield batch


def load_episode(ref: str) -> Trajectory:
    """The full trajectory a summary stands for."""
    path, _, n = ref.partition("#")
    if not n:
        return load_trajectory(path)
    trajs, _ = load_logs(path)
    return trajs[int(n)]


# -- filters --------------------------------------------------------------------------------

ANY_FLAG = "*"


@dataclass
class Filter:
    """What the browser shows: a search text and field filters (None or "" = any)."""

    text: str = ""
    solved: bool | None = None
    strict: bool | None = None   # strictly solved (True) or judged not (False); episodes never judged match neither
    env: str = ""
    set: str = ""
    author: str = ""      # human | agent | mixed
    model: str = ""
    flag: str = ""        # a kind of flag (icplay.scan), or ANY_FLAG for episodes with any

    def matches(self, s: EpisodeSummary) -> bool:
        return self._verdicts_match(s) and self._fields_match(s) and self._text_matches(s)

    def _verdicts_match(self, s: EpisodeSummary) -> bool:
        return ((self.solved is None or s.solved == self.solved)
                and (self.strict is None or s.strict is self.strict))

    def _fields_match(self, s: EpisodeSummary) -> bool:
        """env, set and author exactly; the model by a part of its name (any case)."""
        exact = all(not wanted or got == wanted
                    for wanted, got in ((self.env, s.env), (self.set, s.set), (self.author, s.author)))
        flagged = not self.flag or (bool(s.flags) if self.flag == ANY_FLAG else self.flag in s.flags)
        return exact and flagged and (not self.model or self.model.lower() in s.model.lower())

    def _text_matches(self, s: EpisodeSummary) -> bool:
        """Every word of the search text is somewhere in the summary (any case)."""
        if not self.text:
            return True
        hay = s.haystack()
        return all(word in hay for word in self.text.lower().split())


SORT_KEYS = {
    "date": lambda s: s.date,
    "task": lambda s: (s.set, _natural(s.task)),
    "env": lambda s: s.env,
    "who": lambda s: s.who,
    "turns": lambda s: s.turns,
    "best": lambda s: -2.0 if s.best is None else s.best,
    "final": lambda s: -2.0 if s.final is None else s.final,
    "time": lambda s: s.time_worked,
}


def _natural(text: str) -> tuple:
    return (0, int(text), "") if text.isdigit() else (1, 0, text)


def select(summaries: list[EpisodeSummary], flt: Filter, sort: str = "date",
           descending: bool = True) -> list[EpisodeSummary]:
    """The summaries ``flt`` lets through, sorted by ``sort`` (one of ``SORT_KEYS``)."""
    rows = [s for s in summaries if flt.matches(s)]
    rows.sort(key=SORT_KEYS[sort], reverse=descending)
    return rows


def family(summaries: list[EpisodeSummary], episode_id: str) -> list[EpisodeSummary]:
    """The episode's fork family: the one it was forked from (up the chain) and every fork of it
    (down the tree), in order of date."""
    by_id = {s.id: s for s in summaries}
    root = _family_root(by_id, episode_id)
    if root is None:
        return []
    members, todo = {root.id}, [root.id]
    while todo:
        parent = todo.pop()
        for s in summaries:
            if _parent_id(s) == parent and s.id not in members:
                members.add(s.id)
                todo.append(s.id)
    return sorted((by_id[i] for i in members), key=lambda s: s.date)


def _parent_id(s: EpisodeSummary) -> str | None:
    """The id of the episode ``s`` was forked from (None for an episode of its own)."""
    return s.forked_from.get("id") if s.forked_from else None


def _family_root(by_id: dict[str, EpisodeSummary], episode_id: str) -> EpisodeSummary | None:
    """The episode the fork chain of ``episode_id`` starts from (as far as it is known; a
    cycle stops the walk)."""
    root = by_id.get(episode_id)
    seen = set()
    while root is not None and _parent_id(root) in by_id and root.id not in seen:
        seen.add(root.id)
        root = by_id[_parent_id(root) or ""]
    return root
