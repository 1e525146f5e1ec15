"""Prompts written for icplay: one description per language (and SQL backend), one per
strategy and one per evaluation protocol, assembled into a system message.

They are plain strings so that a user can read them in one place, and short: a model
does better with a clear contract (one command per reply, in a fenced block, ``submit``
when done) than with pages of advice.
"""

from __future__ import annotations

from icplay.agents.parsing import FENCE_LABEL, LANGUAGE_NAME

ROLE = "You are an expert {name} user working in a live {setting}. You solve the user's task by running {name} {units} and reading their output."

SETTINGS = {
    "bash": "Bash shell on Linux (a persistent session: cd, variables and functions carry over between commands)",
    "sql": "SQL database session",
    "python": "Python 3 interpreter (definitions carry over between inputs)",
    "ctf": "Linux shell inside a capture-the-flag challenge (Bash, with Python 3 available)",
}
UNITS = {"bash": "command", "sql": "query", "python": "snippet", "ctf": "command"}
UNITS_PLURAL = {"bash": "commands", "sql": "queries", "python": "snippets", "ctf": "commands"}

LANGUAGE_NOTES = {
    "bash": (
        "- Each command has a 10 second time limit and gets no input on stdin; do not start editors, pagers or\n"
        "  anything interactive (use cat, sed, printf, heredocs).\n"
        "- The files the task is about are under /testbed unless the task says otherwise.\n"
        "- When the task asks for information, the output of your last command is compared with the expected\n"
        "  output, so finish with a command that prints exactly what was asked and nothing else.\n"
        "- When the task asks for a change to files, make exactly that change."
    ),
    "sql": (
        "- One statement per reply. The result rows of your last query are compared with the expected rows, so\n"
        "  finish with a query that returns exactly the requested columns, in the requested order, and no extras.\n"
        "- Explore the schema first if you need to; do not guess table or column names."
    ),
    "python": (
        "- Define the requested function; test it on small examples before submitting.\n"
        "- To submit, reply `submit <function_name>`."
    ),
    "ctf": (
        "- The task's files are in your working directory (/ctf/<task id>); there is no network.\n"
        "- Each command has a 10 second time limit and gets no input on stdin: no editors, pagers or interactive\n"
        "  programs (run gdb with -batch, python3 with -c or a script, feed input with pipes or here-docs).\n"
        "- The flag usually looks like picoCTF{...} or icplay{...}; if the task says how to wrap the answer, do so.\n"
        "- When you have the flag, reply `submit <flag>`: the whole rest of the line is the flag (case does not\n"
        "  matter). A submit ends the episode, so submit only a flag you have seen or computed."
    ),
}

SQL_BACKENDS = {
    "sqlite": "The database is SQLite: list tables with `SELECT name FROM sqlite_master WHERE type='table'` and "
              "see a table's columns with `PRAGMA table_info(table_name)`.",
    "mysql": "The database is MySQL/MariaDB: list tables with `SHOW TABLES` and see a table's columns with "
             "`DESCRIBE table_name`.",
}

PROTOCOLS = {
    "intercode": (
        "After each {unit} you see its output and a reward between 0 and 1 that scores the current result against\n"
        "the correct answer (1.0 means solved, and the episode ends). Use the reward to improve your next {unit}."
    ),
    "agent": (
        "After each {unit} you see its output. When the task is done, reply with `submit` alone to end the episode;\n"
        "you get no score before that, so check your work first."
    ),
}

FORMATS = {
    "single": (
        "You get exactly one {unit} and you will not see its output, so make it the complete answer.\n"
        "Reply with the {unit} in one fenced block:\n```{label}\n...\n```"
    ),
    "tryagain": (
        "Reply with exactly one {name} {unit} per message, in one fenced block, with no explanation:\n"
        "```{label}\n...\n```"
    ),
    "react": (
        "Work in Thought/Action steps. In every reply, first write your reasoning after `Thought:` (one to three\n"
        "sentences), then exactly one {name} {unit} after `Action:` in a fenced block:\n"
        "Thought: ...\nAction: ```{label}\n...\n```"
    ),
    "plan": (
        "You will first be asked for a plan, then for one {unit} per plan step. When asked for a step, reply with\n"
        "exactly one {name} {unit} in one fenced block:\n```{label}\n...\n```"
    ),
}

PLAN_REQUEST = (
    "Before running anything, write a short numbered plan (at most {steps} steps) for solving this task, one\n"
    "line per step, each step something a single {name} {unit} can do. Reply with the plan only, no code."
)
PLAN_STEP = "Step {n} of the plan: {step}\nReply with the {name} {unit} for this step."
PLAN_DONE = ("The plan is done. If the task is solved, reply `submit`; otherwise reply with one {name} {unit} "
             "that fixes what is still wrong.")
PLAN_DONE_INTERCODE = "The plan is done but the task is not solved yet. Reply with one {name} {unit} that fixes it."


def fill(template: str, language: str, **extra) -> str:
    return template.format(name=LANGUAGE_NAME.get(language, language), unit=UNITS.get(language, "command"),
                           units=UNITS_PLURAL.get(language, "commands"),
                           label=FENCE_LABEL.get(language, language), setting=SETTINGS.get(language, language),
                           **extra)


DEMOS_INTRO = "Worked examples of solved tasks, in the reply format above (each reply, then the output it got):"


def demos_block(demos: list[str] | None) -> str | None:
    """Demonstrations (``icplay export fewshot``, ``icplay run --demos``) for the system message."""
    if not demos:
        return None
    parts = [DEMOS_INTRO]
    for i, demo in enumerate(demos, start=1):
        parts += ["", f"Example {i}:", demo.strip()]
    return "\n".join(parts)


def system_prompt(language: str, strategy: str, protocol: str, sandbox: str | None = None,
                  demos: list[str] | None = None) -> str:
    """The system message for one episode; ``demos`` (texts) go last, as worked examples."""
    parts = [fill(ROLE, language), "", "Rules:", LANGUAGE_NOTES.get(language, "")]
    if language == "sql" and sandbox in SQL_BACKENDS:
        parts.append("- " + SQL_BACKENDS[sandbox])
    parts += ["", fill(FORMATS[strategy], language)]
    if strategy != "single":
        proto = PROTOCOLS["intercode" if protocol == "intercode" else "agent"]
        if language in ("python", "ctf") and protocol != "intercode":
            proto = proto.replace("reply with `submit` alone", "reply with `submit <answer>` as the rules say")
        parts += ["", fill(proto, language)]
    block = demos_block(demos)
    if block:
        parts += ["", block]
    return "\n".join(p for p in parts if p is not None).strip()


def task_message(task) -> str:
    """The first user message: the task's query and what else the model needs to know."""
    lines = [f"Task: {task.query.strip()}"]
    if task.env == "sql" and task.db:
        lines.append(f"Database: {task.db}")
    if task.env == "python" and task.extra.get("tests"):
        tests = task.extra["tests"]
        lines.append("Your function must pass tests like:\n" + "\n".join(str(t) for t in tests[:1]))
    return "\n".join(lines)
