"""A study report as one self-contained HTML page: inline CSS, inline SVG drawn here, no
script and no address outside the page, so it opens from a file or an e-mail attachment
with no network and reads the same in ten years.

Plots: solve rate per annotator and per agent with 95% intervals (dot and whisker), time
worked per task for each annotator (box and dots), and the share solved by each turn (one
line each). Tables: the same rows as the terminal report, agreement with what it means, and
humans against agents.
"""

from __future__ import annotations

import html
import time
from typing import Callable, Sequence

from icplay.attempts import counted_note
from icplay.formats.native import skipped_note
from icplay.study.report import (ROW_HEAD, VERSUS_HEAD, VERSUS_NOTE, Row, StudyReport, outside_note, percent,
                                 row_cells, rules_note, versus_cells, kind_note)
from icplay.study.stats import quartiles

# Okabe & Ito's colour-blind-safe palette (yellow left out: too faint on white)
COLOURS = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#1d1d1f")
HUMAN_COLOUR, AGENT_COLOUR, ALL_COLOUR = "#0072B2", "#D55E00", "#1d1d1f"
WIDTH, LEFT, RIGHT, ROW_H, TOP, AXIS_H = 720, 190, 150, 28, 16, 34

CSS = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1d1d1f; background: #fff; margin: 0; }
main { max-width: 1040px; margin: 0 auto; padding: 24px 28px 48px; }
h1 { font-size: 26px; margin: 0 0 4px; }
h2 { font-size: 19px; margin: 32px 0 8px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
p.note, p.meaning { color: #555; margin: 4px 0; }
table { border-collapse: collapse; margin: 8px 0; font-size: 14px; }
th, td { padding: 4px 10px; border-bottom: 1px solid #eee; text-align: right; white-space: nowrap; }
th:first-child, td:first-child { text-align: left; }
thead th { border-bottom: 2px solid #ccc; font-weight: 600; white-space: normal; vertical-align: bottom; }
div.wide { overflow-x: auto; }
td.na { color: #a33; }
svg.plot { display: block; margin: 8px 0; max-width: 100%; height: auto; }
svg.plot text { font: 12px system-ui, sans-serif; fill: #333; }
svg.plot .grid { stroke: #e5e5e5; stroke-width: 1; }
svg.plot .axis { stroke: #999; stroke-width: 1; }
.legend span { display: inline-block; margin-right: 16px; font-size: 13px; }
.legend i { display: inline-block; width: 12px; height: 12px; border-radius: 6px; margin-right: 5px; vertical-align: -1px; }
"""


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _svg(name: str, title: str, height: int, body: list[str]) -> str:
    return (f'<svg class="plot" id="{name}" xmlns="http://www.w3.org/2000/svg" role="img" aria-labelledby="{name}-t" '
            f'width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}"><title id="{name}-t">{_e(title)}</title>'
            + "".join(body) + "</svg>")


def _x_axis(scale: Callable[[float], float], ticks: Sequence[tuple[float, str]], top: int, bottom: int,
            caption: str) -> list[str]:
    """Vertical grid lines at the ticks, their labels and the axis caption under them."""
    out = []
    for value, label in ticks:
        x = scale(value)
        out.append(f'<line class="grid" x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{bottom}"/>')
        out.append(f'<text x="{x:.1f}" y="{bottom + 15}" text-anchor="middle">{_e(label)}</text>')
    mid = (scale(ticks[0][0]) + scale(ticks[-1][0])) / 2
    out.append(f'<text x="{mid:.1f}" y="{bottom + 30}" text-anchor="middle">{_e(caption)}</text>')
    return out


def solve_rate_plot(rows: Sequence[Row]) -> str:
    """Each annotator's and agent's solve rate, a dot, with its Wilson interval as whiskers."""
    height = TOP + ROW_H * max(1, len(rows)) + AXIS_H + 6
    bottom = TOP + ROW_H * max(1, len(rows))

    def x(v: float) -> float:
        return LEFT + v * (WIDTH - LEFT - RIGHT)

    body = _x_axis(x, [(k / 4, f"{25 * k}%") for k in range(5)], TOP - 6, bottom, "solved (InterCode), 95% interval")
    for i, r in enumerate(rows):
        y = TOP + ROW_H * i + ROW_H / 2
        colour = {"agent": AGENT_COLOUR, "humans": ALL_COLOUR}.get(r.kind, HUMAN_COLOUR)
        body.append(f'<text x="{LEFT - 10}" y="{y + 4:.1f}" text-anchor="end">{_e(r.label)}</text>')
        if r.solved.rate is None or r.solved.low is None or r.solved.high is None:
            body.append(f'<text x="{x(0) + 6:.1f}" y="{y + 4:.1f}" fill="#999">no episode submitted</text>')
            continue
        lo, hi, mid = x(r.solved.low), x(r.solved.high), x(r.solved.rate)
        body.append(f'<g class="whisker" stroke="{colour}" stroke-width="2">'
                    f'<line x1="{lo:.1f}" y1="{y:.1f}" x2="{hi:.1f}" y2="{y:.1f}"/>'
                    f'<line x1="{lo:.1f}" y1="{y - 6:.1f}" x2="{lo:.1f}" y2="{y + 6:.1f}"/>'
                    f'<line x1="{hi:.1f}" y1="{y - 6:.1f}" x2="{hi:.1f}" y2="{y + 6:.1f}"/></g>')
        body.append(f'<circle cx="{mid:.1f}" cy="{y:.1f}" r="5.5" fill="{colour}">'
                    f'<title>{_e(r.label)}: {_e(r.solved.cell())}</title></circle>')
        body.append(f'<text x="{WIDTH - RIGHT + 12}" y="{y + 4:.1f}">{_e(f"{r.solved.solved}/{r.solved.of}")} '
                    f'{_e(percent(r.solved.rate))}</text>')
    return _svg("solve-rate", "Solve rate per annotator and agent with 95% Wilson intervals", height, body)


def _nice_max(value: float) -> float:
    """The axis end: the first of 1, 2, 5 x 10^k at or above ``value``."""
    step = 1.0
    while step * 10 < value:
        step *= 10
    for m in (1, 2, 5, 10):
        if value <= m * step:
            return m * step
    return 10 * step


def time_plot(rows: Sequence[Row]) -> str:
    """Each annotator's time worked per task: a box (quartiles, median) over the dots."""
    rows = [r for r in rows if r.times_s]
    height = TOP + ROW_H * max(1, len(rows)) + AXIS_H + 6
    bottom = TOP + ROW_H * max(1, len(rows))
    top_minutes = _nice_max(max((t / 60 for r in rows for t in r.times_s), default=1.0) or 1.0)

    def x(minutes: float) -> float:
        return LEFT + minutes / top_minutes * (WIDTH - LEFT - RIGHT)

    body = _x_axis(x, [(top_minutes * k / 4, f"{top_minutes * k / 4:g}") for k in range(5)], TOP - 6, bottom,
                   "minutes worked per task")
    for i, r in enumerate(rows):
        body += _time_row(r, TOP + ROW_H * i + ROW_H / 2, x)
    if not rows:
        body.append(f'<text x="{LEFT}" y="{TOP + 16}" fill="#999">no time worked was recorded</text>')
    return _svg("time-per-task", "Time worked per task, per annotator", height, body)


def _time_row(r: Row, y: float, x: Callable[[float], float]) -> list[str]:
    """One annotator's times: the range, the box from quartile to quartile, the median, the dots."""
    minutes = [t / 60 for t in r.times_s]
    q1, q2, q3 = quartiles(minutes)
    out = [f'<text x="{LEFT - 10}" y="{y + 4:.1f}" text-anchor="end">{_e(r.label)}</text>',
           f'<line class="range" x1="{x(min(minutes)):.1f}" y1="{y:.1f}" x2="{x(max(minutes)):.1f}" '
           f'y2="{y:.1f}" stroke="#888"/>',
           f'<rect class="box" x="{x(q1):.1f}" y="{y - 8:.1f}" width="{max(1.0, x(q3) - x(q1)):.1f}" '
           f'height="16" fill="#dbe9f5" stroke="{HUMAN_COLOUR}"/>',
           f'<line x1="{x(q2):.1f}" y1="{y - 8:.1f}" x2="{x(q2):.1f}" y2="{y + 8:.1f}" '
           f'stroke="{HUMAN_COLOUR}" stroke-width="2.5"/>']
    for k, m in enumerate(minutes):
        jitter = ((k * 7) % 5 - 2) * 2.0       # spread equal times apart, the same every time
        out.append(f'<circle class="dot" cx="{x(m):.1f}" cy="{y + jitter:.1f}" r="3" fill="#333" '
                   f'fill-opacity="0.7"><title>{m:.1f} min</title></circle>')
    out.append(f'<text x="{WIDTH - RIGHT + 12}" y="{y + 4:.1f}">median {q2:.1f} min</text>')
    return out


def by_turn_plot(rows: Sequence[Row], max_turns: int) -> str:
    """The share of episodes solved by each turn: one line per annotator and agent."""
    rows = [r for r in rows if r.by_turn]
    plot_w, plot_h, left, top = WIDTH - 80 - 40, 240, 80, 16
    height = top + plot_h + AXIS_H + 8
    n = max(1, max_turns)

    def x(turn: float) -> float:
        return left + (turn - 1) / max(1, n - 1) * plot_w if n > 1 else left + plot_w / 2

    def y(share: float) -> float:
        return top + (1 - share) * plot_h

    body = []
    for k in range(5):
        body.append(f'<line class="grid" x1="{left}" y1="{y(k / 4):.1f}" x2="{left + plot_w}" y2="{y(k / 4):.1f}"/>')
        body.append(f'<text x="{left - 8}" y="{y(k / 4) + 4:.1f}" text-anchor="end">{25 * k}%</text>')
    step = max(1, n // 10)
    body += _x_axis(x, [(t, str(t)) for t in range(1, n + 1, step)], top, top + plot_h, "turn")
    for r, colour in zip(rows, curve_colours(rows)):
        dash = ' stroke-dasharray="6 3"' if r.kind == "agent" else ""
        points = " ".join(f"{x(k + 1):.1f},{y(share):.1f}" for k, share in enumerate(r.by_turn))
        body.append(f'<polyline class="curve" points="{points}" fill="none" stroke="{colour}" stroke-width="2.5"{dash}>'
                    f'<title>{_e(r.label)}</title></polyline>')
        for k, share in enumerate(r.by_turn):
            body.append(f'<circle cx="{x(k + 1):.1f}" cy="{y(share):.1f}" r="3" fill="{colour}">'
                        f'<title>{_e(r.label)}: {percent(share)} by turn {k + 1}</title></circle>')
    return _svg("solved-by-turn", "Share of episodes solved by each turn", height, body)


def curve_colours(rows: Sequence[Row]) -> list[str]:
    """A colour per curve: all annotators together in black, the first agent in the agents'
    colour of the solve-rate plot, everyone else the next colour of the palette."""
    free = iter([c for c in COLOURS if c not in (AGENT_COLOUR, ALL_COLOUR)] * (len(rows) + 1))
    out, agent_seen = [], False
    for r in rows:
        if r.kind == "humans":
            out.append(ALL_COLOUR)
        elif r.kind == "agent" and not agent_seen:
            out.append(AGENT_COLOUR)
            agent_seen = True
        else:
            out.append(next(free))
    return out


def _legend(rows: Sequence[Row]) -> str:
    shown = [r for r in rows if r.by_turn]
    return '<p class="legend">' + "".join(
        f'<span><i style="background:{colour}"></i>{_e(r.label)}{" (agent, dashed)" if r.kind == "agent" else ""}'
        f"</span>" for r, colour in zip(shown, curve_colours(shown))) + "</p>"


def _table(head: Sequence[str], rows: Sequence[tuple[str, Sequence[str]]], first: str = "") -> str:
    out = ['<div class="wide"><table><thead><tr>', f"<th>{_e(first)}</th>", *(f"<th>{_e(h)}</th>" for h in head), "</tr></thead><tbody>"]
    for name, cells in rows:
        out.append(f"<tr><td>{_e(name)}</td>" + "".join(f"<td>{_e(c)}</td>" for c in cells) + "</tr>")
    out.append("</tbody></table></div>")
    return "".join(out)


def _agreement(report: StudyReport) -> str:
    out = ["<table><thead><tr><th>figure</th><th>on</th><th>value</th><th>tasks</th><th>ratings</th></tr></thead><tbody>"]
    for a in report.agreement:
        klass = "" if a.value is not None else ' class="na"'
        out.append(f"<tr><td>{_e(a.name)}</td><td>{_e(a.on)}</td><td{klass}>{_e(a.cell())}</td>"
                   f"<td>{a.tasks}</td><td>{a.ratings}</td></tr>")
    out.append("</tbody></table>")
    out += [f'<p class="meaning"><b>{_e(a.name)}</b>: {_e(a.meaning)}</p>' for a in report.agreement]
    return "".join(out)


def render_html(report: StudyReport, generated: float | None = None) -> str:
    """The whole page."""
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(generated if generated is not None else time.time()))
    sections = [
        f"<h1>Study {_e(report.name)}</h1>",
        f'<p class="note">{_e(counted_note(report.attempts))} · solved is InterCode\'s (reward 1.0); strict where '
        f"the env gives a strict verdict · intervals are Wilson 95% · made {_e(when)}</p>",
        f'<p class="note">{_e(rules_note(report.rules))}</p>' if report.rules else "",
        f'<p class="note">{_e(kind_note(report))}</p>' if report.kind else "",
        *_body(report), *(f'<p class="note">{_e(n)}</p>' for n in _notes(report)),
    ]
    return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>Study {_e(report.name)}: report</title><style>{CSS}</style></head>"
            f"<body><main>{''.join(sections)}</main></body></html>\n")


def _body(report: StudyReport) -> list[str]:
    """The plots and tables, in the order a reader wants them (agents' parts only when given)."""
    people = report.annotators + report.agents
    out = ["<h2>Solve rate</h2>", solve_rate_plot(people),
           "<h2>Per annotator</h2>", _table(ROW_HEAD, [(r.label, row_cells(r)) for r in report.annotators], "annotator")]
    if report.agents:
        out += ["<h2>Per agent</h2>", _table(ROW_HEAD, [(r.label, row_cells(r)) for r in report.agents], "agent")]
    out += ["<h2>Agreement between annotators</h2>",
            '<p class="note">Each task is a unit; each annotator\'s submitted attempt of it is a rating.</p>',
            _agreement(report),
            "<h2>Time worked per task</h2>", time_plot(report.annotators),
            "<h2>Solved by turn</h2>", by_turn_plot(people, report.max_turns), _legend(people)]
    if report.versus:
        out += ["<h2>Humans against agents</h2>", f'<p class="note">{_e(VERSUS_NOTE)}.</p>',
                _table(VERSUS_HEAD, [(p.agent, versus_cells(p)) for p in report.versus], "agent")]
    return out + ["<h2>Per task</h2>", _table(ROW_HEAD, [(r.label, row_cells(r)) for r in report.tasks], "task")]


def _notes(report: StudyReport) -> list[str]:
    notes = [outside_note(report.outside) + "."] if report.outside else []
    return notes + ([skipped_note(report.skipped) + "."] if report.skipped else [])
