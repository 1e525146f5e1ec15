"""Line mode, the front end of ``icplay play --plain`` and ``icplay watch --plain`` (and a
study's queue with ``--plain``): one loop over the driver, beside the TUI.

The driver runs on its own thread; this loop (the main thread, so Ctrl+C lands here)
prints what happens and answers the broker's requests with lines read from stdin.

After an agent's proposal (thought and action printed) one line decides: empty — run it;
``e ACTION`` — run ACTION instead; ``r COMMENT`` — reject it with COMMENT; ``t`` — take
over; ``s`` — submit; ``q`` — stop. When the human acts (``play --plain``, or after ``t``)
each line is an action (SQL: up to a line ending with ``;``); ``submit`` scores the task,
``:agent`` hands back to the agent, ``:skip`` leaves the task for later, ``:quit`` stops.

Under ``watch`` stdin is read all the time (on a thread), so these work at any moment —
also while the model thinks, a command runs, or a decision waits: ``:auto``, ``:confirm``,
``:human`` switch mode (a waiting proposal runs, waits or is dropped accordingly);
``:pause`` stops before the next step, ``:step`` lets exactly one more step through,
``:go`` goes on; ``:stop`` ends the episode (saved, resumable). Lines are taken in order:
a decision waits for the next question, a ``:`` command acts when it is reached — so a
script reads like a session.

Ctrl+C interrupts a running command (the turn is kept), takes over from a model that is
thinking, and quits only at the prompt. Output, and every line quoting what others wrote,
is shown with control characters and bidirectional controls made visible (an action's
escape sequences cannot repaint the terminal, a right-to-left override cannot reorder a
name); the trajectory keeps the raw text.

- ``loop`` — ``LineLoop``: one episode, its events printed as they come;
- ``answers`` — the driver's requests answered from lines, the ``:`` commands;
- ``text`` — what line mode says (help, tables, observations, rewards as the language explains them);
- ``output``, ``stdin`` — where lines go and come from;
- ``tasks`` — a set's tasks one after another; ``study`` — an annotator's queue of a study.

What differs by language is asked of its spec (``input_mode``, ``input_help``, ``prompt``,
``explain_lines``), never decided by its name.
"""

from icplay.frontend.display import display
from icplay.lines.answers import QUIT, SKIPPED, SUBMITTED, action_complete
from icplay.lines.loop import LineLoop
from icplay.lines.stdin import StdinLines, echoing_input
from icplay.lines.tasks import first_unfinished, run_tasks
from icplay.lines.text import AGENT_HELP, HUMAN_HELP, describe_observation, describe_reward, format_table

__all__ = ["LineLoop", "run_tasks", "first_unfinished", "display", "format_table", "describe_observation",
           "describe_reward", "action_complete", "StdinLines", "echoing_input", "SUBMITTED", "SKIPPED", "QUIT",
           "HUMAN_HELP", "AGENT_HELP"]
