"""Success tables over trajectories: one run, or several side by side (agents, humans).

The figures are InterCode's: an episode is *solved* when its best reward is 1.0; the
success rate is solved / episodes, overall and by hardness; *success by turn k* is the
share of episodes solved within their first k turns (turns = executed actions plus
unparsable replies; a human's rejected proposals do not count). Under the ``intercode``
protocol an episode is solved at the first turn whose per-turn reward is 1.0; otherwise
(``agent`` protocol, human play) at the turn count when it was submitted.

Beside InterCode's solved stands the strict verdict (``Trajectory.strictly_solved``: the
reward is 1.0 and nothing in the result could be had without solving; docs/rewards.md).
It is counted over the episodes that have one: an episode whose env gave no verdict is
neither strictly solved nor not (shown "–"), and the table says how many were judged.

Tables are split by env and set (``group_by_set``): one table per (env, set), one column
per log that has episodes there. A SQL reward can be negative (the right rows in the wrong
order: IoU times Kendall's tau-b), so the mean best reward can be too; the table counts
episodes whose final reward is below 0, and ``icplay report`` says so under SQL tables.

The author mix counts every episode's turns by who made them (agent, edited by a human,
human, rejected proposals, unparsable replies) and the agent episodes a human stepped
into (``Trajectory.intervened``); it is shown when any turn was not the agent's alone.

``summarize`` gives a :class:`Summary`; ``render_table`` draws summaries as columns of
one table; ``render_curve`` draws success by turn as a terminal chart.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterable

from icplay.episode import Trajectory, strict_mark
from icplay.formats.native import load_logs, run_label  # noqa: F401  (read here by `icplay report`)

HARDNESS_ORDER = ("easy", "medium", "hard", "extra")


def counted_turns(traj: Trajectory) -> int:
    return traj.turns_taken


def solved_at(traj: Trajectory) -> int | None:
    """The turn (1-based) by which the episode was solved, or None if it was not."""
    if not traj.solved:
        return None
    n = 0
    for turn in traj.turns:
        if turn.counts:
            n += 1
            if turn.reward is not None and turn.reward >= 1.0:
                return n
    return max(1, n)


def finished(traj: Trajectory) -> bool:
    return traj.status == "submitted"


@dataclass
class Summary:
    label: str
    episodes: int = 0
    solved: int = 0
    strict_solved: int = 0                                           # strictly solved (see the module docstring)
    strict_judged: int = 0                                           # episodes with a strict verdict
    by_hardness: dict[str, list[int]] = field(default_factory=dict)   # hardness -> [solved, episodes]
    mean_turns: float = 0.0
    mean_reward: float = 0.0
    max_turns: int = 0
    by_turn: list[float] = field(default_factory=list)               # success rate by turn 1..max_turns
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = 0.0
    unpriced_calls: int = 0
    calls: int = 0
    errors: int = 0
    unfinished: int = 0
    time_worked: float = 0.0
    authors: dict[str, int] = field(default_factory=dict)            # turns by kind: agent, edited, human, ...
    intervened: int = 0                                              # agent episodes a human stepped into
    agent_episodes: int = 0
    negative: int = 0                                                # episodes whose final reward is below 0
    truncated_replies: int = 0                                       # replies cut at the token limit
    usage_unknown_calls: int = 0                                     # calls whose server reported no usage
    estimated_calls: int = 0                                         # calls whose tokens icplay counted (estimates)
    reasoning_tokens: int = 0
    after_gold: int = 0                                              # counted attempts made after the gold was shown
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def rate(self) -> float:
        return self.solved / self.episodes if self.episodes else 0.0

    @property
    def strict_rate(self) -> float | None:
        """Strictly solved over the episodes judged; None when none was."""
        return self.strict_solved / self.strict_judged if self.strict_judged else None

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["rate"] = round(self.rate, 6)
        d["strict_rate"] = None if self.strict_rate is None else round(self.strict_rate, 6)
        d["tokens"] = self.tokens
        d["by_hardness"] = {k: {"solved": v[0], "episodes": v[1], "rate": round(v[0] / v[1], 6) if v[1] else 0.0}
                            for k, v in self.by_hardness.items()}
        d["by_turn"] = [round(x, 6) for x in self.by_turn]
        return d


def summarize(trajectories: Iterable[Trajectory], label: str = "", max_turns: int | None = None) -> Summary:
    """The table figures over finished episodes; unfinished and errored ones are only counted."""
    trajs = list(trajectories)
    done = [t for t in trajs if finished(t)]
    s = Summary(label=label)
    _add_outcomes(s, trajs, done)
    s.by_hardness = _by_hardness(done)
    _add_turn_figures(s, done, max_turns)
    _add_usage(s, trajs)
    kinds = sorted({str(t.policy.get("kind", "?")) for t in trajs})
    s.info = {"policy": kinds, "env": sorted({str(t.env) for t in trajs}),
              "set": sorted({str(t.task.get("set", "")) for t in trajs})}
    return s


def _add_outcomes(s: Summary, trajs: list[Trajectory], done: list[Trajectory]) -> None:
    """How the episodes ended: counted, errored, unfinished, solved (InterCode's and strict)."""
    s.errors = sum(t.status == "error" for t in trajs)
    s.unfinished = sum(t.status not in ("submitted", "error") for t in trajs)
    s.episodes = len(done)
    s.solved = sum(t.solved for t in done)
    verdicts = [t.strictly_solved for t in done]
    s.strict_judged = sum(v is not None for v in verdicts)
    s.strict_solved = sum(v is True for v in verdicts)
    s.negative = sum((t.reward or 0.0) < 0 for t in done)
    s.after_gold = sum(t.after_gold_seen for t in done)


def _hardness_key(h: str) -> tuple[int, str]:
    """InterCode's hardness order first, other labels after it alphabetically."""
    order = {h: i for i, h in enumerate(HARDNESS_ORDER)}
    return order.get(h, len(order)), h


def _by_hardness(done: list[Trajectory]) -> dict[str, list[int]]:
    """[solved, episodes] by the tasks' hardness ("-" when none is given)."""
    hard: dict[str, list[int]] = {}
    for t in done:
        entry = hard.setdefault(t.task.get("hardness") or "-", [0, 0])
        entry[0] += int(t.solved)
        entry[1] += 1
    return dict(sorted(hard.items(), key=lambda kv: _hardness_key(kv[0])))


def _turn_limit(done: list[Trajectory], turns: list[int]) -> int:
    """The largest turn limit the episodes declare, else the most turns one took."""
    declared = [int(t.policy["max_turns"]) for t in done if t.policy.get("max_turns")]
    return max(declared or turns or [0])


def _add_turn_figures(s: Summary, done: list[Trajectory], max_turns: int | None) -> None:
    """Mean turns and best reward, the turn limit, and the share solved by each turn."""
    turns = [counted_turns(t) for t in done]
    s.mean_turns = _mean(turns)
    s.mean_reward = _mean([_best_reward(t) for t in done])
    s.max_turns = max_turns or _turn_limit(done, turns)
    at = [solved_at(t) for t in done]
    s.by_turn = [_mean([a is not None and a <= k for a in at]) for k in range(1, s.max_turns + 1)]


def _best_reward(t: Trajectory) -> float:
    return t.best_reward if t.best_reward is not None else (t.reward or 0.0)


def _mean(values: list[Any]) -> float:
    """The mean (of numbers or of bools: a share); 0.0 of nothing."""
    return sum(values) / len(values) if values else 0.0


# Summary's figure <- the usage key it sums
USAGE_FIGURES = (("prompt_tokens", "prompt_tokens"), ("completion_tokens", "completion_tokens"), ("calls", "calls"),
                 ("unpriced_calls", "cost_unknown"), ("usage_unknown_calls", "completion_tokens_unknown"),
                 ("reasoning_tokens", "reasoning_tokens"), ("estimated_calls", "estimated_calls"))


def _add_usage(s: Summary, trajs: list[Trajectory]) -> None:
    """Tokens, calls, cost, time and authors over every episode (finished or not)."""
    cost = sum(_add_episode_usage(s, t) for t in trajs)
    s.cost = cost if s.calls and s.unpriced_calls < s.calls else (None if s.calls else 0.0)


def _add_episode_usage(s: Summary, t: Trajectory) -> float:
    """One episode's share of ``_add_usage``; its cost in dollars (0.0 when none is known)."""
    usage = t.policy.get("usage") or {}
    for figure, key in USAGE_FIGURES:
        setattr(s, figure, getattr(s, figure) + (usage.get(key) or 0))
    s.truncated_replies += sum(1 for turn in t.turns if turn.info.get("reply_truncated"))
    s.time_worked += t.time_worked or 0.0
    for kind, n in t.author_mix().items():
        s.authors[kind] = s.authors.get(kind, 0) + n
    if t.policy.get("kind", "human") != "human":
        s.agent_episodes += 1
        s.intervened += int(t.intervened)
    return float(usage.get("cost") or 0.0)


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _tokens(n: int) -> str:
    return f"{n:,}"


def _estimate_mark(s: Summary) -> str:
    """Said after a figure that holds tokens icplay counted itself (the server did not say)."""
    if not s.estimated_calls:
        return ""
    return " (estimate)" if s.estimated_calls >= s.calls else f" (estimate: {s.estimated_calls} calls)"


def _token_cell(s: Summary, n: int) -> str:
    if not s.calls:
        return "-"
    if s.usage_unknown_calls >= s.calls:
        return "unknown"
    return (_tokens(n) + (f" (+{s.usage_unknown_calls} calls unknown)" if s.usage_unknown_calls else "")
            + _estimate_mark(s))


def _cost(s: Summary) -> str:
    if not s.calls:
        return "-"
    if s.cost is None:
        return "unpriced"
    text = ("~" if s.estimated_calls else "") + f"${s.cost:.4f}"
    if s.unpriced_calls:
        text += f" (+{s.unpriced_calls} unpriced calls)"
    return text + _estimate_mark(s)


def strict_cell(s: Summary) -> str:
    """Strictly solved as the table shows it: like InterCode's when every episode was judged,
    with the number judged when only some were, "–" when none was."""
    if not s.strict_judged:
        return strict_mark(None)
    if s.strict_judged == s.episodes:
        return f"{s.strict_solved} ({_pct(s.strict_solved / s.episodes)})"
    return f"{s.strict_solved}/{s.strict_judged} judged ({_pct(s.strict_solved / s.strict_judged)})"


Rows = list[tuple[str, list[str]]]


def render_table(summaries: list[Summary], title: str | None = None) -> str:
    """One column per summary; rows: episodes, solved (InterCode's, by hardness, then strict), turns,
    success by turn, tokens, cost."""
    rows: Rows = [("episodes", [str(s.episodes) for s in summaries]),
                  ("solved (InterCode)", [f"{s.solved} ({_pct(s.rate)})" for s in summaries])]
    rows += _hardness_rows(summaries)
    rows.append(("solved (strict)", [strict_cell(s) for s in summaries]))
    rows.append(("mean turns", [f"{s.mean_turns:.2f}" for s in summaries]))
    rows.append(("mean best reward", [f"{s.mean_reward:.3f}" for s in summaries]))
    rows += _when_any(summaries, "  final reward < 0", "negative")
    rows += _when_any(summaries, "  after the gold was shown", "after_gold")
    rows += _by_turn_rows(summaries)
    rows += _usage_rows(summaries)
    rows += _when_any(summaries, "truncated replies", "truncated_replies")
    rows += _when_any(summaries, "time worked", "time_worked", lambda m: f"{m / 60:.1f} min" if m else "-")
    rows += _author_rows(summaries)
    rows += _when_any(summaries, "errors (not counted)", "errors")
    rows += _when_any(summaries, "unfinished (not counted)", "unfinished")
    return lay_out(rows, [s.label or f"run {i + 1}" for i, s in enumerate(summaries)], title)


def _when_any(summaries: list[Summary], name: str, figure: str, cell: Callable[[Any], str] = str) -> Rows:
    """The row of one figure of the summaries, when any of them has it."""
    values = [getattr(s, figure) for s in summaries]
    return [(name, [cell(v) for v in values])] if any(values) else []


def _by_turn_rows(summaries: list[Summary]) -> Rows:
    """The share solved by each turn, up to the longest turn limit."""
    n = max((s.max_turns for s in summaries), default=0)
    return [(f"solved by turn {k}", [_pct(s.by_turn[k - 1]) if k <= len(s.by_turn) else "-" for s in summaries])
            for k in range(1, n + 1)]


def _hardness_rows(summaries: list[Summary]) -> Rows:
    """Solved by hardness, one row a label any summary has (none when no task gives one)."""
    hardness: list[str] = []
    for s in summaries:
        hardness += [h for h in s.by_hardness if h not in hardness]
    if sorted(hardness) == ["-"]:
        return []

    def cell(v: list[int] | None) -> str:
        return f"{v[0]}/{v[1]} ({_pct(v[0] / v[1])})" if v and v[1] else "-"

    return [(f"  {h}", [cell(s.by_hardness.get(h)) for s in summaries]) for h in sorted(hardness, key=_hardness_key)]


def _usage_rows(summaries: list[Summary]) -> Rows:
    """Tokens and cost, when a model was called."""
    if not any(s.calls for s in summaries):
        return []

    def split(s: Summary) -> str:
        if s.calls and s.usage_unknown_calls < s.calls:
            return f"{_tokens(s.prompt_tokens)} / {_tokens(s.completion_tokens)}"
        return "unknown" if s.calls else "-"

    rows: Rows = [("tokens", [_token_cell(s, s.tokens) for s in summaries]),
                  ("  prompt / completion", [split(s) for s in summaries])]
    if any(s.reasoning_tokens for s in summaries):
        rows.append(("  of which reasoning", [_tokens(s.reasoning_tokens) for s in summaries]))
    rows.append(("cost", [_cost(s) for s in summaries]))
    return rows


AUTHOR_ROWS = (("agent", "agent"), ("edited", "edited by a human"), ("human", "human"),
               ("rejected", "rejected"), ("invalid", "unparsable"))


def _author_rows(summaries: list[Summary]) -> Rows:
    """Turns by author and the episodes a human stepped into, when any was."""
    if not any(s.intervened for s in summaries):
        return []
    rows: Rows = [(f"turns: {label}", [str(s.authors.get(kind, 0)) for s in summaries])
                  for kind, label in AUTHOR_ROWS if any(s.authors.get(kind) for s in summaries)]
    rows.append(("episodes with intervention", [f"{s.intervened}/{s.agent_episodes}" if s.agent_episodes else "-"
                                                for s in summaries]))
    return rows


def lay_out(rows: Rows, head: list[str], title: str | None) -> str:
    """The rows under their column heads, names left-aligned, cells right-aligned."""
    left = max(len(r[0]) for r in rows)
    widths = [max(len(head[i]), *(len(r[1][i]) for r in rows)) for i in range(len(head))]
    lines = [title] if title else []
    lines.append(" " * left + "".join(f"  {h:>{w}}" for h, w in zip(head, widths)))
    for name, cells in rows:
        lines.append(f"{name:<{left}}" + "".join(f"  {c:>{w}}" for c, w in zip(cells, widths)))
    return "\n".join(line.rstrip() for line in lines)


def group_by_set(trajectories: Iterable[Trajectory]) -> dict[tuple[str, str], list[Trajectory]]:
    """Episodes by (env, set): one table each."""
    groups: dict[tuple[str, str], list[Trajectory]] = {}
    for t in trajectories:
        groups.setdefault((str(t.env), str(t.task.get("set", ""))), []).append(t)
    return groups


MARKS = "*o+x#@%&"


def render_curve(summaries: list[Summary], height: int = 10) -> str:
    """Success by turn as a terminal chart: y 0-100%, x turns 1..N, one mark per run."""
    n = max((len(s.by_turn) for s in summaries), default=0)
    if n == 0:
        return "(no turns to draw)"
    col = 4
    grid = _curve_grid(summaries, n * col, height, col)
    lines = ["solved by turn"]
    for r in range(height + 1):
        pct = 100 * (height - r) / height
        label = f"{pct:3.0f}% " if r % 2 == 0 else "     "
        lines.append(label + ("┤" if r % 2 == 0 else "│") + "".join(grid[r]).rstrip())
    lines.append("     └" + "─" * (n * col))
    lines.append("      " + "".join(f"{k:^{col}}" for k in range(1, n + 1)).rstrip())
    lines.append("      " + _curve_legend(summaries))
    return "\n".join(lines)


def _curve_grid(summaries: list[Summary], width: int, height: int, col: int) -> list[list[str]]:
    """The chart's cells, row 0 at 100%: each run's mark at its rate by turn, ``=`` where two
    runs' marks fall on one cell."""
    grid = [[" "] * width for _ in range(height + 1)]
    for si, s in enumerate(summaries):
        mark = MARKS[si % len(MARKS)]
        for k, rate in enumerate(s.by_turn):
            row = round(rate * height)
            x = k * col + col // 2
            cell = grid[height - row][x]
            grid[height - row][x] = mark if cell in (" ", mark) else "="
    return grid


def _curve_legend(summaries: list[Summary]) -> str:
    legend = "   ".join(f"{MARKS[i % len(MARKS)]} {s.label or f'run {i + 1}'}" for i, s in enumerate(summaries))
    if len(summaries) > 1:
        legend += "   = overlap"
    return legend
