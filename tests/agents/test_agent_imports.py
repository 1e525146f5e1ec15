"""The agents, the runner and the report import without textual (DESIGN.md's rule)."""

import subprocess
import sys


def test_no_textual_outside_the_tui():
    code = ("import sys, icplay.executors.local, icplay.report, icplay.agents.llm, icplay.agents.replay, "
            "icplay.agents.protocols, icplay.commands.run, icplay.commands.report; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'textual'))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
