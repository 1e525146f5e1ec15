"""A scan over saved episodes: each episode's flags, counts per flag, and task health.

``scan_paths`` reads what ``icplay report`` reads (run folders, trajectory files, InterCode
results and log files, folders of them, and the earlier attempts kept beside a folder), runs
the scanners over each episode and keeps one light row per episode (never its turns), so a
scan of thousands of episodes holds their flags, not their outputs. A file that cannot be
read is named in ``skipped`` with why; the others are scanned.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from icplay.episode import Trajectory, annotator_label, strict_mark
from icplay.formats.native import Skipped, folder_files, load_logs
from icplay.scan.flags import GROUPS, KINDS, Flag, kind_of
from icplay.scan.health import FINDINGS, HealthTally, TaskHealth, finding_counts
from icplay.scan.registry import Scanner, scan_trajectory
from icplay.store import ATTEMPT_NAME, TrajectoryFileError, attempts_folders, readable


@dataclass
class EpisodeRow:
    """What a scan keeps of one episode: where it is, who played, how it ended, its flags."""

    ref: str
    id: str
    set: str
    task: str
    env: str
    who: str
    reward: float | None
    solved: bool
    strict: bool | None
    turns: int
    flags: list[Flag] = field(default_factory=list)
    failures: list[tuple[str, str]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"ref": self.ref, "id": self.id, "set": self.set, "task": self.task, "env": self.env, "who": self.who,
                "reward": self.reward, "solved": self.solved, "strict": self.strict, "turns": self.turns,
                "flags": [f.to_dict() for f in self.flags],
                "failures": [{"scanner": n, "error": e} for n, e in self.failures]}


def who_played(traj: Trajectory) -> str:
    """The annotator of a human episode; the model (or policy) of an agent's."""
    policy = traj.policy or {}
    kind = str(policy.get("kind") or "human")
    if kind == "human":
        return annotator_label(traj.annotator)
    return "/".join(str(x) for x in (kind, policy.get("model"), policy.get("strategy")) if x)


def episode_row(ref: str, traj: Trajectory, flags: list[Flag], failures: list[tuple[str, str]]) -> EpisodeRow:
    best = traj.best_reward if traj.best_reward is not None else traj.reward
    return EpisodeRow(ref, traj.id, str(traj.task.get("set", "")), str(traj.task.get("id", "")), traj.env,
                      who_played(traj), best, traj.solved, traj.strictly_solved, traj.turns_taken, flags, failures)


@dataclass
class ScanReport:
    """The scan of some paths: episode rows, task health, files skipped, scanners run."""

    episodes: list[EpisodeRow]
    health: list[TaskHealth]
    skipped: list[Skipped]
    scanners: list[str]
    notes: list[str] = field(default_factory=list)     # e.g. what the model scanner spent
    tally: HealthTally = field(default_factory=HealthTally)

    def add_gold_problems(self, problems: dict[str, str]) -> None:
        """The gold check's findings (``set/id`` -> why) joined to the task health."""
        self.health = self.tally.result(problems)

    def counts(self) -> dict[str, tuple[int, int]]:
        """Per flag kind: (flags, episodes with it), in the kinds' order, kinds never raised left out."""
        flags: dict[str, int] = {}
        episodes: dict[str, int] = {}
        for row in self.episodes:
            for kind in {f.kind for f in row.flags}:
                episodes[kind] = episodes.get(kind, 0) + 1
            for f in row.flags:
                flags[f.kind] = flags.get(f.kind, 0) + 1
        order = {g: i for i, g in enumerate(GROUPS)}
        kinds = sorted(flags, key=lambda k: (order.get(kind_of(k).group, len(order)), _kind_index(k)))
        return {k: (flags[k], episodes[k]) for k in kinds}

    @property
    def flagged(self) -> int:
        return sum(bool(r.flags) for r in self.episodes)

    def to_dict(self) -> dict[str, Any]:
        return {"episodes": [r.to_dict() for r in self.episodes],
                "counts": {k: {"flags": n, "episodes": e} for k, (n, e) in self.counts().items()},
                "health": [r.to_dict() for r in self.health], "findings": finding_counts(self.health),
                "skipped": [{"path": s.path, "reason": s.reason} for s in self.skipped],
                "scanners": self.scanners, "notes": self.notes}


def _kind_index(kind: str) -> int:
    return list(KINDS).index(kind) if kind in KINDS else len(KINDS)


def _file_episodes(file: Path, skipped: list[Skipped]) -> list[tuple[str, Trajectory]]:
    try:
        trajs, _ = load_logs(file)
    except TrajectoryFileError as exc:
        skipped.append(Skipped.of(file, exc))
        return []
    return [(str(file), trajs[0])] if len(trajs) == 1 else [(f"{file}#{n}", t) for n, t in enumerate(trajs)]


def _earlier_attempts(folder: Path, skipped: list[Skipped]) -> Iterator[tuple[str, Trajectory]]:
    for kept in attempts_folders(folder):
        for file in sorted(p for p in kept.rglob("*.json") if ATTEMPT_NAME.fullmatch(p.name)):
            bad: list = []
            for traj in readable([file], bad):
                yield str(file), traj
            skipped += [Skipped.of(path, exc) for path, exc in bad]


def episodes_of(paths: list[str | Path], skipped: list[Skipped]) -> Iterator[tuple[str, Trajectory]]:
    """(ref, trajectory) of every episode under ``paths``; files that cannot be read go to ``skipped``."""
    for given in paths:
        path = Path(given)
        if path.is_dir():
            for file in folder_files(path):
                yield from _file_episodes(file, skipped)
            yield from _earlier_attempts(path, skipped)
        elif path.is_file():
            yield from _file_episodes(path, skipped)
        else:
            skipped.append(Skipped(str(path), "no such file or folder"))


def scan_paths(paths: list[str | Path], scanners: list[tuple[str, Scanner]],
               progress: Callable[[int], None] | None = None) -> ScanReport:
    """Every episode under ``paths`` scanned, with the health of their tasks."""
    skipped: list[Skipped] = []
    rows, tally = [], HealthTally()
    for n, (ref, traj) in enumerate(episodes_of(paths, skipped), 1):
        found = scan_trajectory(traj, scanners)
        rows.append(episode_row(ref, traj, found.flags, found.failures))
        tally.add(traj, found.flags)
        if progress is not None:
            progress(n)
    return ScanReport(rows, tally.result(), skipped, [name for name, _ in scanners], tally=tally)


FLAG_HEAD = f"{'KIND':<24} {'GROUP':<12} {'FLAGS':>6} {'EPISODES':>9}  MEANING"


def render_counts(report: ScanReport) -> str:
    """The counts per flag, one line a kind, with what each kind means."""
    total = len(report.episodes)
    lines = [f"{total:,} episodes scanned, {report.flagged:,} flagged", FLAG_HEAD]
    for kind, (flags, episodes) in report.counts().items():
        k = kind_of(kind)
        lines.append(f"{kind:<24} {k.group:<12} {flags:>6} {episodes:>9}  {k.meaning}")
    if not report.counts():
        lines.append("(no flags)")
    return "\n".join(lines)


def render_episodes(report: ScanReport, only: set[str] | None = None) -> str:
    """Each flagged episode, then its flags one a line with the turn and the evidence."""
    lines = []
    for row in report.episodes:
        flags = [f for f in row.flags if not only or f.kind in only]
        if not flags and not row.failures:
            continue
        lines.append(f"{row.ref}  {row.set}/{row.task}  {row.who}  reward {_reward(row.reward)}  "
                     f"strict {strict_mark(row.strict)}")
        for f in flags:
            lines.append(f"  {f.turn_label:<8} {f.kind:<24} {f.evidence}")
        for name, error in row.failures:
            lines.append(f"  {'':<8} scanner {name!r} failed: {error}")
    return "\n".join(lines)


def _reward(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


HEALTH_HEAD = f"{'SET/TASK':<22} {'HUMANS':>7} {'AGENTS':>7} {'STRICT':>6} {'SUSPECT':>7}  FINDINGS"


def render_health(rows: list[TaskHealth], limit: int | None = None) -> str:
    """Task health: the tasks with a finding, one a line, then how many tasks have each finding."""
    found = [r for r in rows if r.findings]
    lines = [f"{len(found):,} of {len(rows):,} tasks look broken or split", HEALTH_HEAD]
    for r in found[:limit]:
        findings = "; ".join(f"{name}: {why}" for name, why in r.findings.items())
        lines.append(f"{(r.set + '/' + r.task)[:22]:<22} {r.humans_solved:>3}/{r.humans:<3} {r.agents_solved:>3}/"
                     f"{r.agents:<3} {r.strict_solved:>6} {r.suspects:>7}  {findings}")
    if limit is not None and len(found) > limit:
        lines.append(f"… {len(found) - limit:,} more (--json or --html for all)")
    counts = finding_counts(rows)
    lines.append("  ".join(f"{name} {counts[name]}" for name in FINDINGS))
    return "\n".join(lines)
