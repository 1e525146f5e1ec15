"""Prompts written for icplay: one per strategy and one per evaluation protocol, with the
language's own words (its setting, unit and rules: ``LanguageSpec.prompts``), assembled
into a system message.

They are plain strings so that a user can read them in one place, and short: a model
does better with a clear contract (one command per reply, in a fenced block, ``submit``
when done) than with pages of advice.
"""

from __future__ import annotations

from icplay.agents.parsing import language_prompts

ROLE = "You are an expert {name} user working in a live {setting}. You solve the user's task by running {name} {units} and reading their output."

PROTOCOLS = {
    "intercode": (
        "After each {unit} you see its output and a reward of at most 1 that scores the current result against\n"
        "the correct answer (1.0 means solved, and the episode ends; a SQL result in the wrong order can score below 0).\n"
        "Use the reward to improve your next {unit}."
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

# the same, for the tools protocol (``--actions tools``): {tool} is the tool that runs code
TOOL_FORMATS = {
    "single": (
        "You get exactly one call of the `{tool}` tool and you will not see its output, so make it the complete\n"
        "answer."
    ),
    "tryagain": (
        "Act by calling the tools: `{tool}` runs one {name} {unit} and returns its output. Call one tool per reply\n"
        "(several calls in one reply run in order, each counting as a turn)."
    ),
    "react": (
        "Work in Thought/Action steps. In every reply, first write your reasoning (one to three sentences) as the\n"
        "message text, then call one tool: `{tool}` runs one {name} {unit} and returns its output."
    ),
    "plan": (
        "You will first be asked for a plan, as text. Then, for each plan step, call the `{tool}` tool once: it runs\n"
        "one {name} {unit} and returns its output."
    ),
}
TOOL_PROTOCOLS = {
    "intercode": (
        "After each call you see its output and a reward of at most 1 that scores the current result against\n"
        "the correct answer (1.0 means solved, and the episode ends; a SQL result in the wrong order can score below 0).\n"
        "Use the reward to improve your next {unit}."
    ),
    "agent": (
        "After each call you see its output. When the task is done, call the `submit` tool to end the episode;\n"
        "you get no score before that, so check your work first. Where the rules say to reply `submit`, call the\n"
        "`submit` tool instead."
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
    p = language_prompts(language)
    return template.format(name=p.name, unit=p.unit, units=p.units, label=p.fence or language, setting=p.setting,
                           tool=p.run_tool, **extra)


def unit(language: str) -> str:
    """What one action is called ("command", "query", "snippet")."""
    return language_prompts(language).unit


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
                  demos: list[str] | None = None, actions: str = "text") -> str:
    """The system message for one episode; ``demos`` (texts) go last, as worked examples;
    ``actions`` "tools" describes the tools instead of the fenced reply format."""
    words = language_prompts(language)
    tools = actions == "tools"
    parts = [fill(ROLE, language), "", "Rules:", words.notes]
    if sandbox in words.sandbox_notes:
        parts.append("- " + words.sandbox_notes[sandbox])
    parts += ["", fill((TOOL_FORMATS if tools else FORMATS)[strategy], language)]
    if strategy != "single":
        proto = (TOOL_PROTOCOLS if tools else PROTOCOLS)["intercode" if protocol == "intercode" else "agent"]
        if words.submit_arg and protocol != "intercode" and not tools:
            proto = proto.replace("reply with `submit` alone", "reply with `submit <answer>` as the rules say")
        parts += ["", fill(proto, language)]
    block = demos_block(demos)
    if block:
        parts += ["", block]
    return "\n".join(p for p in parts if p is not None).strip()


def task_message(task) -> str:
    """The first user message: the task's query and what else the model needs to know."""
    lines = [f"Task: {task.query.strip()}"]
    words = language_prompts(task.env)
    if words.task_lines is not None:
        lines += words.task_lines(task)
    return "\n".join(lines)
