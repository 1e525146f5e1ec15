"""A scan as one self-contained HTML page: inline CSS (the study report's), an inline SVG
chart drawn here, no script and no address outside the page.

Sections: counts per flag (a bar per kind, coloured by group, with what each means), task
health (the tasks with a finding), and every flagged episode with its flags, turn and
evidence. Everything the solver wrote (evidence, task ids, paths) is escaped: it reads as
text, never as markup.
"""

from __future__ import annotations

import html
import os
import time
from typing import Sequence

from icplay.episode import strict_mark
from icplay.formats.native import skipped_note
from icplay.scan.flags import GROUPS, kind_of
from icplay.scan.health import FINDINGS, finding_counts
from icplay.scan.report import ScanReport
from icplay.study.html import COLOURS, CSS

GROUP_COLOURS = dict(zip((*GROUPS, "plug-in"), COLOURS))
BAR_W, BAR_LEFT, BAR_H, BAR_TOP = 720, 200, 24, 8
PAGE_CSS = CSS + """
td.ev, th.ev { text-align: left; white-space: normal; font-family: ui-monospace, monospace; font-size: 13px; min-width: 360px; }
td.left, th.left { text-align: left; white-space: normal; }
span.ref { font-size: 12px; color: #666; word-break: break-all; }
th.ev { font-family: inherit; font-size: 14px; }
span.kind { display: inline-block; padding: 0 6px; border-radius: 4px; color: #fff; font-size: 12px; }
"""


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def counts_plot(report: ScanReport) -> str:
    """One bar per flag kind: the episodes flagged with it."""
    counts = report.counts()
    height = BAR_TOP * 2 + BAR_H * max(1, len(counts)) + 20
    top = max((e for _, e in counts.values()), default=1) or 1
    body = []
    for i, (kind, (flags, episodes)) in enumerate(counts.items()):
        y = BAR_TOP + i * BAR_H
        width = (BAR_W - BAR_LEFT - 170) * episodes / top
        colour = GROUP_COLOURS.get(kind_of(kind).group, COLOURS[-1])
        body.append(f'<text x="{BAR_LEFT - 8}" y="{y + 16}" text-anchor="end">{_e(kind)}</text>'
                    f'<rect class="bar" x="{BAR_LEFT}" y="{y + 4}" width="{width:.1f}" height="{BAR_H - 8}" '
                    f'fill="{colour}"/><text x="{BAR_LEFT + width + 6:.1f}" y="{y + 16}">{episodes} '
                    f'episode{"s" if episodes != 1 else ""} · {flags} flag{"s" if flags != 1 else ""}</text>')
    return (f'<svg class="plot" id="flag-counts" xmlns="http://www.w3.org/2000/svg" role="img" '
            f'aria-labelledby="flag-counts-t" width="{BAR_W}" height="{height}" viewBox="0 0 {BAR_W} {height}">'
            f'<title id="flag-counts-t">Episodes flagged, per kind of flag</title>{"".join(body)}</svg>')


def _table(head: Sequence[str], rows: Sequence[Sequence[str]], table_id: str, classes: Sequence[str] = ()) -> str:
    """A table of already-escaped cells (``classes``: a class per column, "" for none)."""
    classes = [*classes, *[""] * len(head)]
    out = [f'<div class="wide"><table id="{table_id}"><thead><tr>',
           *(f'<th class="{c}">{_e(h)}</th>' for h, c in zip(head, classes)), "</tr></thead><tbody>"]
    for cells in rows:
        out.append("<tr>" + "".join(f'<td class="{c}">{cell}</td>' for cell, c in zip(cells, classes)) + "</tr>")
    out.append("</tbody></table></div>")
    return "".join(out)


def _kind_badge(kind: str) -> str:
    colour = GROUP_COLOURS.get(kind_of(kind).group, COLOURS[-1])
    return f'<span class="kind" style="background:{colour}">{_e(kind)}</span>'


def _counts_table(report: ScanReport) -> str:
    rows = [(_kind_badge(k), _e(kind_of(k).group), str(n), str(e), _e(kind_of(k).meaning))
            for k, (n, e) in report.counts().items()]
    return _table(("flag", "group", "flags", "episodes", "meaning"), rows, "counts", ("left", "", "", "", "left"))


def _health_table(report: ScanReport) -> str:
    found = [r for r in report.health if r.findings]
    rows = [(_e(f"{r.set}/{r.task}"), f"{r.humans_solved}/{r.humans}", f"{r.agents_solved}/{r.agents}",
             str(r.strict_solved), str(r.suspects),
             "<br>".join(f"<b>{_e(name)}</b>: {_e(why)}" for name, why in r.findings.items())) for r in found]
    counts = finding_counts(report.health)
    legend = "".join(f'<p class="meaning"><b>{_e(name)}</b> ({counts[name]} tasks): {_e(meaning)}</p>'
                     for name, meaning in FINDINGS.items())
    return (f'<p class="note">{len(found)} of {len(report.health)} tasks have a finding; solved counts are '
            f"solved/attempts (InterCode's reward 1.0).</p>{legend}"
            + _table(("task", "humans", "agents", "strict", "suspects", "findings"), rows, "health",
                     ("left", "", "", "", "", "ev")))


def _base(refs: list[str]) -> str:
    """The folder every episode is under (shown once; each row shows the rest), or ""."""
    try:
        return os.path.commonpath([os.path.dirname(r.split("#", 1)[0]) for r in refs]) if refs else ""
    except ValueError:                  # absolute and relative paths mixed
        return ""


def _episodes_table(report: ScanReport) -> str:
    flagged = [r for r in report.episodes if r.flags]
    base = _base([r.ref for r in flagged])
    rows = []
    for r in flagged:
        flags = "<br>".join(f"{_kind_badge(f.kind)} {_e(f.turn_label)}: {_e(f.evidence)}" for f in r.flags)
        reward = "-" if r.reward is None else f"{r.reward:.2f}"
        ref = os.path.relpath(r.ref, base) if base else r.ref
        rows.append((f'{_e(f"{r.set}/{r.task}")}<br><span class="ref">{_e(ref)}</span>', _e(r.who), reward,
                     strict_mark(r.strict), flags))
    where = f'<p class="note">Episodes under {_e(base)}</p>' if base else ""
    return where + _table(("episode", "who", "reward", "strict", "flags (turn: evidence)"), rows, "episodes",
                          ("left", "left", "", "", "ev"))


def render_page(report: ScanReport, title: str = "icplay scan", generated: float | None = None) -> str:
    """The whole page."""
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(generated if generated is not None else time.time()))
    notes = [*report.notes, *([skipped_note(report.skipped)] if report.skipped else [])]
    sections = [
        f"<h1>{_e(title)}</h1>",
        f'<p class="note">{len(report.episodes):,} episodes scanned, {report.flagged:,} flagged · scanners: '
        f"{_e(', '.join(report.scanners))} · made {_e(when)}</p>",
        "<h2>Flags</h2>", counts_plot(report), _counts_table(report),
        "<h2>Task health</h2>", _health_table(report),
        "<h2>Flagged episodes</h2>", _episodes_table(report),
        *(f'<p class="note">{_e(n)}</p>' for n in notes),
    ]
    return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{_e(title)}</title><style>{PAGE_CSS}</style></head>"
            f"<body><main>{''.join(sections)}</main></body></html>\n")
