"""A query's result, which the solver controls, copied or saved from the SQL pane's grid
(icplay.tui.gridtext): a cell cannot run in a spreadsheet, break a Markdown row, or carry
terminal control sequences into a report."""

from __future__ import annotations

import csv
import io

from icplay.tui.gridtext import format_for, grid_csv, grid_markdown

HOSTILE = [("=HYPERLINK(\"http://x\",\"y\")", "+1+1", "-2+3", "@SUM(A1)", "\tTAB", "a\r\nb"),
           ("a|b", "line\nbreak", "\x1b]52;c;ZXZpbA==\x07", None, b"\x00\xff", 7)]
COLUMNS = ["c1", "c2", "c3", "c4", "c5", "c6"]


def test_csv_cells_that_look_like_formulas_are_quoted_and_the_rows_read_back_whole():
    rows = list(csv.reader(io.StringIO(grid_csv(COLUMNS, HOSTILE))))
    assert rows[0] == COLUMNS and len(rows) == 3
    assert all(cell.startswith("'") for cell in rows[1][:5])                 # none starts a formula
    assert rows[1][5] == "a\r\nb"                                           # one cell, its line break kept
    assert rows[2][:2] == ["a|b", "line\nbreak"] and rows[2][3:] == ["", "0x00ff", "7"]   # NULL empty, a number as is


def test_markdown_cells_stay_one_cell_of_one_row_without_control_characters():
    lines = grid_markdown(COLUMNS, HOSTILE).splitlines()
    assert len(lines) == 4 and lines[1] == "|---|---|---|---|---|---|"
    assert all(line.count(" | ") - line.count("\\| ") == 5 for line in lines[2:]), lines
    assert "\x1b" not in "".join(lines) and "\x07" not in "".join(lines)
    assert "a\\|b" in lines[3] and "line⏎break" in lines[3] and "NULL" in lines[3]


def test_the_file_name_says_the_format():
    assert [format_for(n) for n in ("r.md", "R.MARKDOWN", "r.csv", "r", "r.txt")] == \
        ["markdown", "markdown", "csv", "csv", "csv"]
