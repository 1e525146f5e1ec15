"""A study's report: per annotator, per task and per agent, the annotators' agreement, and
humans against agents on the same tasks (``icplay study report``; the page is ``html``).

The figures are ``icplay report``'s, not counted again: an episode counts once it was
submitted; *solved* is InterCode's (best reward 1.0) and *strict* the strict verdict over the
episodes that have one (``icplay.report.summarize``); each annotator's attempts of a task are
chosen as ``icplay.attempts.choose`` does (the first, pass@1, by default). On top of them:
Wilson 95% intervals, median time worked and turns, every attempt made and how many of them
came after the gold was shown.

Agreement treats each task as a unit and each annotator's submitted attempt of it as a
rating (the first attempt when every attempt is counted, so that nobody rates a task twice):
Fleiss' kappa on solved (yes/no) and Krippendorff's alpha (interval) on the best reward.
Humans against agents pairs every such rating with the agent's episode on the same task.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, is_dataclass
from pathlib import Path
from typing import Any, Iterable, Protocol, Sequence

from icplay.attempts import ALL, FIRST, choose, counted_note
from icplay.episode import Trajectory, annotator_label
from icplay.formats.native import Skipped, load_earlier_attempts, load_logs, run_label
from icplay.report import counted_turns, finished, lay_out, summarize
from icplay.store import TrajectoryFileError
from icplay.study.stats import INTERVAL, Undefined, category_counts, fleiss_kappa, krippendorff_alpha, median, wilson

ANNOTATOR, HUMANS, TASK, AGENT = "annotator", "humans", "task", "agent"
ALL_ANNOTATORS = "all annotators"


class StudyShape(Protocol):
    """What the report reads of a study (``icplay.study.model.Study``, a frozen dataclass)."""

    @property
    def name(self) -> str: ...
    @property
    def tasks(self) -> tuple[str, ...]: ...
    @property
    def annotators(self) -> tuple[str, ...]: ...
    @property
    def assignments(self) -> dict[str, tuple[str, ...]]: ...


@dataclass
class Rate:
    """``solved`` out of ``of`` with its Wilson 95% interval (None when ``of`` is 0)."""

    solved: int
    of: int
    low: float | None = None
    high: float | None = None

    @classmethod
    def of_counts(cls, solved: int, of: int) -> "Rate":
        if not of:
            return cls(solved, of)
        low, high = wilson(solved, of)
        return cls(solved, of, low, high)

    @property
    def rate(self) -> float | None:
        return self.solved / self.of if self.of else None

    def cell(self) -> str:
        if not self.of:
            return "-"
        return f"{self.solved}/{self.of} {percent(self.solved / self.of)} [{percent(self.low)}–{percent(self.high)}]"


@dataclass
class Row:
    """One annotator, task or agent: what it was given, did and solved."""

    label: str
    kind: str                      # annotator | humans (every annotator together) | task | agent
    assigned: int                  # tasks assigned (annotator), annotators assigned (task), study tasks done (agent)
    episodes: int                  # counted and submitted
    solved: Rate                   # InterCode's
    strict: Rate                   # over the episodes with a strict verdict (of = 0: none has one)
    median_time_s: float | None    # time worked (humans only)
    median_turns: float | None
    attempts: int                  # every attempt made (counted or not)
    after_gold: int                # of them, made after the gold of that task was shown
    unfinished: int = 0            # counted attempts not submitted (running, stopped, error)
    by_turn: list[float] = field(default_factory=list)     # share solved by turn 1..N
    times_s: list[float] = field(default_factory=list)     # time worked of each counted episode
    turns: list[int] = field(default_factory=list)          # turns of each counted episode


@dataclass
class Agreement:
    """One agreement figure, or why there is none."""

    name: str
    on: str
    value: float | None
    reason: str | None             # why value is None
    meaning: str
    tasks: int                     # tasks with 2 or more ratings
    ratings: int

    def cell(self) -> str:
        return f"{self.value:.3f}" if self.value is not None else f"n/a ({self.reason})"


KAPPA_MEANING = ("1 = annotators always agree on whether a task was solved; 0 = they agree only as often "
                 "as chance would; below 0 = less often than chance.")
ALPHA_MEANING = ("1 = every annotator of a task got the same reward; 0 = rewards agree only as much as chance; "
                 "large differences weigh more (squared). 0.8 and above is commonly read as reliable.")


@dataclass
class Pairing:
    """The annotators' ratings of tasks against one agent's episode on the same task."""

    agent: str
    tasks: int                     # tasks both humans and the agent submitted
    pairs: int
    both: int
    only_humans: int
    only_agent: int
    neither: int


@dataclass
class StudyReport:
    name: str
    attempts: str                  # which attempts are counted (icplay.attempts)
    annotators: list[Row]          # each annotator, then all of them together (kind "humans")
    tasks: list[Row]
    agents: list[Row]
    agreement: list[Agreement]
    versus: list[Pairing]
    max_turns: int
    outside: int = 0               # episodes of tasks not in the study (left out)
    skipped: list[Skipped] = field(default_factory=list)
    rules: dict[str, Any] = field(default_factory=dict)     # the study's rules (icplay.study.model.StudyRules)
    kind: str = ""                 # play | watch | mixed (``study_kind``), "" before any episode
    agents_supervised: list[str] = field(default_factory=list)   # watch: the models (or policies) supervised

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["counting"] = counted_note(self.attempts)
        for group in ("annotators", "tasks", "agents"):
            for row, obj in zip(d[group], getattr(self, group)):
                row["solved"]["rate"] = obj.solved.rate
                row["strict"]["rate"] = obj.strict.rate
        return d


Agents = list[tuple[str, list[Trajectory]]]


def build_report(study: StudyShape, trajectories: Iterable[Trajectory], agents: Sequence[tuple[str, list[Trajectory]]] = (),
                 attempts: str = FIRST, skipped: list[Skipped] | None = None) -> StudyReport:
    """The report of ``study`` over its annotators' ``trajectories`` (every attempt) and the
    ``agents``' (label, trajectories) on the same tasks."""
    tasks = set(study.tasks)
    all_trajs = list(trajectories)
    made = _by_annotator(t for t in all_trajs if t.task_key in tasks)
    counted, ratings = _counted(made, attempts)
    theirs = [(label, [t for t in trajs if t.task_key in tasks]) for label, trajs in agents]
    max_turns = _max_turns(_flat(counted) + [t for _, trajs in theirs for t in trajs])
    return StudyReport(
        name=study.name, attempts=attempts, annotators=_annotator_rows(study, made, counted, max_turns),
        tasks=_task_rows(study, made, counted, max_turns), agents=_agent_rows(theirs, max_turns),
        agreement=agreement(ratings), versus=[_pairing(label, ratings, trajs) for label, trajs in theirs],
        max_turns=max_turns, outside=len(all_trajs) - len(_flat(made)), skipped=list(skipped or []),
        rules=_rules(study), kind=study_kind(_flat(made)), agents_supervised=supervised(_flat(made)))


PLAY, WATCH, MIXED = "play", "watch", "mixed"


def _supervised(t: Trajectory) -> bool:
    """An agent acted and the annotator supervised (``icplay watch --study``)."""
    return str(t.policy.get("kind") or "human") != "human"


def study_kind(trajs: Sequence[Trajectory]) -> str:
    """Play (the annotators acted), watch (they supervised an agent), or mixed; from the episodes."""
    kinds = {WATCH if _supervised(t) else PLAY for t in trajs}
    return kinds.pop() if len(kinds) == 1 else (MIXED if kinds else "")


def supervised(trajs: Sequence[Trajectory]) -> list[str]:
    """The agents the annotators supervised: the model, else the policy's kind (for the lead; the
    annotators may not have seen it)."""
    return sorted({str(t.policy.get("model") or t.policy.get("kind")) for t in trajs if _supervised(t)})


def kind_note(report: "StudyReport") -> str:
    """Which kind of study the figures are of, in one line."""
    agents = ", ".join(report.agents_supervised)
    return {PLAY: "play study: each annotator worked the tasks herself",
            WATCH: f"watch study: each annotator supervised an agent ({agents}); the figures are the supervised "
                   "episodes' (the agent acted, the annotator approved, edited, took over), time worked the "
                   "annotator's",
            MIXED: f"mixed study: some episodes played by the annotators, some supervised ({agents}); the figures "
                   "count both alike"}.get(report.kind, "")


ByAnnotator = dict[str, list[Trajectory]]


def _flat(by_who: ByAnnotator, task: str | None = None) -> list[Trajectory]:
    """The episodes of every annotator (of one task, when given)."""
    return [t for trajs in by_who.values() for t in trajs if task is None or t.task_key == task]


def _annotator_rows(study: StudyShape, made: ByAnnotator, counted: ByAnnotator, max_turns: int) -> list[Row]:
    """The study's annotators in its order, anyone else whose episodes are in it, then all of them
    together (the human baseline)."""
    names = list(study.annotators) + sorted(set(made) - set(study.annotators))
    rows = [_row(who, ANNOTATOR, len(study.assignments.get(who, ())), counted.get(who, []), made.get(who, []),
                 max_turns) for who in names]
    given = sum(len(refs) for refs in study.assignments.values())
    return rows + [_row(ALL_ANNOTATORS, HUMANS, given, _flat(counted), _flat(made), max_turns)]


def _counted(made: ByAnnotator, attempts: str) -> tuple[ByAnnotator, "Ratings"]:
    """Each annotator's counted attempts, and the ratings agreement reads (one per annotator and
    task: the first attempt when every attempt is counted)."""
    counted = {who: _choose(trajs, attempts) for who, trajs in made.items()}
    rating = FIRST if attempts == ALL else attempts
    return counted, _ratings({who: _choose(trajs, rating) for who, trajs in made.items()})


def _agent_rows(agents: Sequence[tuple[str, list[Trajectory]]], max_turns: int) -> list[Row]:
    return [_row(label, AGENT, len({t.task_key for t in trajs}), trajs, trajs, max_turns, human=False)
            for label, trajs in agents]


def _task_rows(study: StudyShape, made: ByAnnotator, counted: ByAnnotator, max_turns: int) -> list[Row]:
    given = [task for refs in study.assignments.values() for task in refs]
    return [_row(task, TASK, given.count(task), _flat(counted, task), _flat(made, task), max_turns)
            for task in study.tasks]


def _rules(study: StudyShape) -> dict[str, Any]:
    rules = getattr(study, "rules", None)
    return asdict(rules) if is_dataclass(rules) and not isinstance(rules, type) else {}


def rules_note(rules: dict[str, Any]) -> str:
    """The rules an annotator worked under, in one line ("" when unknown)."""
    if not rules:
        return ""
    limit = rules.get("time_limit_s")
    parts = [f"gold reveal {'on' if rules.get('gold_reveal') else 'off'}", f"retries {rules.get('retries', 'off')}",
             f"time limit {limit // 60} min" if isinstance(limit, int) else "no time limit",
             "strict mode" if rules.get("strict") else "", "" if rules.get("per_turn_scoring", True) else
             "per-turn scores hidden", "" if rules.get("query_history", True) else "no query history"]
    return "rules: " + ", ".join(p for p in parts if p)


def _by_annotator(trajs: Iterable[Trajectory]) -> dict[str, list[Trajectory]]:
    out: dict[str, list[Trajectory]] = {}
    for t in trajs:
        out.setdefault(annotator_label(t.annotator), []).append(t)
    return out


def _choose(trajs: list[Trajectory], mode: str) -> list[Trajectory]:
    """One annotator's counted attempts (``icplay.attempts.choose``): numbered ones in their order,
    an unnumbered file (saved before attempts were numbered) as that task's latest."""
    return choose([t for t in trajs if t.attempt is None], [t for t in trajs if t.attempt is not None], mode)


def _max_turns(trajs: list[Trajectory]) -> int:
    """The turn axis every curve shares: the longest turn limit declared or turns taken."""
    declared = [int(t.policy["max_turns"]) for t in trajs if t.policy.get("max_turns")]
    return max(declared + [counted_turns(t) for t in trajs if finished(t)] + [1])


def _row(label: str, kind: str, assigned: int, counted: list[Trajectory], made: list[Trajectory],
         max_turns: int, human: bool = True) -> Row:
    """One row, its solved and strict counts from ``icplay.report.summarize``."""
    s = summarize(counted, label, max_turns)
    done = [t for t in counted if finished(t)]
    times = [t.time_worked or 0.0 for t in done]
    turns = [counted_turns(t) for t in done]
    return Row(label=label, kind=kind, assigned=assigned, episodes=s.episodes,
               solved=Rate.of_counts(s.solved, s.episodes), strict=Rate.of_counts(s.strict_solved, s.strict_judged),
               median_time_s=_median(times) if human else None, median_turns=_median(turns),
               attempts=len(made), after_gold=sum(t.after_gold_seen for t in made),
               unfinished=len(counted) - s.episodes, by_turn=s.by_turn, times_s=times if human else [], turns=turns)


def _median(values: Sequence[float]) -> float | None:
    try:
        return median(values)
    except Undefined:
        return None


Ratings = dict[str, dict[str, Trajectory]]     # task -> annotator -> the submitted attempt that rates it


def _ratings(rated: dict[str, list[Trajectory]]) -> Ratings:
    out: Ratings = {}
    for who, trajs in rated.items():
        for t in trajs:
            if finished(t):
                out.setdefault(t.task_key, {})[who] = t
    return out


def best_reward(t: Trajectory) -> float:
    """The reward solved is judged on (``Trajectory.solved``): the best over the episode."""
    return float(t.best_reward if t.best_reward is not None else (t.reward or 0.0))


def agreement(ratings: Ratings) -> list[Agreement]:
    """Fleiss' kappa on solved and Krippendorff's alpha on the best reward, task by task."""
    units = [list(by_who.values()) for _, by_who in sorted(ratings.items())]
    shared = [u for u in units if len(u) >= 2]
    n = sum(len(u) for u in shared)
    kappa = _figure(lambda: fleiss_kappa(category_counts([[t.solved for t in u] for u in units], [True, False])))
    alpha = _figure(lambda: krippendorff_alpha([[best_reward(t) for t in u] for u in units], INTERVAL))
    return [Agreement("Fleiss' kappa", "solved", *kappa, KAPPA_MEANING, len(shared), n),
            Agreement("Krippendorff's alpha (interval)", "reward", *alpha, ALPHA_MEANING, len(shared), n)]


def _figure(compute) -> tuple[float | None, str | None]:
    try:
        return compute(), None
    except Undefined as exc:
        return None, str(exc)


# (a human solved it, the agent solved it) -> the Pairing count it adds to
OUTCOMES = {(True, True): "both", (True, False): "only_humans", (False, True): "only_agent", (False, False): "neither"}


def _pairing(agent: str, ratings: Ratings, agent_trajs: list[Trajectory]) -> Pairing:
    """Every annotator's rating of a task against the agent's first submitted episode on it."""
    theirs: dict[str, Trajectory] = {}
    for t in sorted(agent_trajs, key=lambda t: t.attempt or 0):
        if finished(t):
            theirs.setdefault(t.task_key, t)
    p = Pairing(agent, 0, 0, 0, 0, 0, 0)
    for task in set(ratings) & set(theirs):
        p.tasks += 1
        for t in ratings[task].values():
            p.pairs += 1
            outcome = OUTCOMES[(t.solved, theirs[task].solved)]
            setattr(p, outcome, getattr(p, outcome) + 1)
    return p


def load_agents(folders: Sequence[str | Path], attempts: str = FIRST,
                skipped: list[Skipped] | None = None) -> Agents:
    """(label, counted trajectories) of each agent run folder, read as ``icplay report`` reads
    it; a folder or file that cannot be read goes to ``skipped``."""
    out: Agents = []
    seen: dict[str, int] = {}
    for folder in folders:
        try:
            trajs, meta = load_logs(folder, skipped)
        except TrajectoryFileError as exc:
            if skipped is None:
                raise
            skipped.append(Skipped.of(folder, exc))
            continue
        if not trajs:
            continue                    # every file of it was skipped (and named)
        label = run_label(meta, Path(folder).name or str(folder))
        seen[label] = seen.get(label, 0) + 1
        if seen[label] > 1:
            label = f"{label} ({seen[label]})"
        out.append((label, choose(trajs, load_earlier_attempts(folder, skipped), attempts)))
    return out


# -- as text -----------------------------------------------------------------------------------

def percent(x: float | None) -> str:
    """A share as a whole percentage, halves rounded up (5/8 is 63%, as a reader rounds)."""
    return "-" if x is None else f"{math.floor(100 * x + 0.5)}%"


def _minutes(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds / 60:.1f} min"


def _number(x: float | None) -> str:
    return "-" if x is None else f"{x:g}"


ROW_HEAD = ["given", "done", "solved (InterCode) [95% CI]", "solved (strict)", "median time", "median turns",
            "attempts", "after gold"]


def row_cells(r: Row) -> list[str]:
    strict = r.strict.cell() if r.strict.of else "–"
    if r.strict.of and r.strict.of < r.episodes:
        strict = strict.replace(" ", " judged ", 1)           # "1/2 judged 50% [9%–91%]"
    return [str(r.assigned), str(r.episodes) + (f" (+{r.unfinished} open)" if r.unfinished else ""), r.solved.cell(),
            strict, _minutes(r.median_time_s), _number(r.median_turns), str(r.attempts), str(r.after_gold)]


VERSUS_HEAD = ["tasks", "pairs", "both solved", "only humans", "only agent", "neither"]
VERSUS_NOTE = "Each annotator's rating of a task paired with the agent's episode on it"


def versus_cells(p: Pairing) -> list[str]:
    return [str(n) for n in (p.tasks, p.pairs, p.both, p.only_humans, p.only_agent, p.neither)]


def outside_note(n: int) -> str:
    return f"{n} episode{'s' if n != 1 else ''} of tasks outside the study left out"


def render_text(report: StudyReport) -> str:
    """The report as terminal tables."""
    parts = [" · ".join(x for x in (f"study {report.name}", counted_note(report.attempts), rules_note(report.rules)) if x)]
    if report.kind:
        parts.append(kind_note(report))
    for title, rows in (("per annotator", report.annotators), ("per task", report.tasks),
                        ("per agent", report.agents)):
        if rows:
            parts.append(lay_out([(r.label, row_cells(r)) for r in rows], ROW_HEAD, f"\n{title}"))
    parts.append("\nagreement between annotators (each task a unit, each annotator's submitted attempt a rating)")
    for a in report.agreement:
        parts.append(f"  {a.name} on {a.on}: {a.cell()}   [{a.tasks} tasks, {a.ratings} ratings]")
        parts.append(f"    {a.meaning}")
    if report.versus:
        parts.append(lay_out([(p.agent, versus_cells(p)) for p in report.versus], VERSUS_HEAD,
                             f"\nhumans against agents ({VERSUS_NOTE[0].lower()}{VERSUS_NOTE[1:]})"))
    if report.outside:
        parts.append(f"\n{outside_note(report.outside)}")
    return "\n".join(parts)
