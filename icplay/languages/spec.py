"""A language spec: everything icplay needs to know about one action space, in one object.

A spec is declarative and cheap to import. What is heavy (the env, the TUI pane) is named
by a reference — a callable, or an import path ``"module:attribute"`` resolved on first
use — so that ``icplay tasks`` never imports Docker clients and only ``icplay.tui`` ever
imports the pane (only icplay.tui imports textual).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Callable, Union

from icplay.languages.turns import RUN_THEN_SUBMIT, TurnRule
from icplay.tasks.model import Task
from icplay.sandbox import registry

Ref = Union[str, Callable[..., Any]]

# A shell language's ``sandboxes``: every kind the sandbox registry knows (Docker, bwrap,
# Podman, a plug-in's), the default the first available of docker, bwrap.
SHELL_SANDBOXES: tuple[str, ...] = ("<shell sandboxes>",)


def resolve(ref: Ref) -> Any:
    """The object a reference names: itself when it is not a string, else ``module:attr``."""
    if not isinstance(ref, str):
        return ref
    module, _, attr = ref.partition(":")
    obj: Any = importlib.import_module(module)
    for part in filter(None, attr.split(".")):
        obj = getattr(obj, part)
    return obj


@dataclass(frozen=True)
class Prompts:
    """How prompts and the reply parser speak of the language.

    ``bare_code`` names the heuristic that accepts an unfenced reply as code ("shell",
    "sql", "python", or "" for never). ``sandbox_notes`` adds a rule per sandbox (e.g. how
    to list SQLite's tables); ``task_lines`` adds lines to the task message (e.g. the
    database's name). ``tool``/``tool_arg``/``submit_arg_*`` name the typed tools of the
    tools protocol (``icplay.agents.tools``).
    """

    name: str                                  # "Bash": in "one Bash command"
    setting: str                               # "Bash shell on Linux (...)"
    unit: str = "command"
    units: str = "commands"
    fence: str = ""                            # the fence label to ask for (default: the spec's name)
    fence_aliases: tuple[str, ...] = ()        # labels accepted on a model's fence
    notes: str = ""                            # the rules, "- ..." lines
    bare_code: str = ""
    submit_arg: bool = False                   # submit takes an argument (Python's function, CTF's flag)
    submit_arg_name: str = "answer"            # that argument's name in the submit tool ("function_name", "flag")
    submit_arg_help: str = "what to submit"    # and its description
    tool: str = ""                             # the tool that runs code (--actions tools; default: the fence label)
    tool_arg: str = ""                         # its parameter (default: the unit: "command", "query")
    sandbox_notes: dict[str, str] = field(default_factory=dict)
    task_lines: Callable[[Task], list[str]] | None = None

    @property
    def run_tool(self) -> str:
        """The name of the tool that runs one action (``bash``, ``sql``, ``python``)."""
        return self.tool or self.fence or self.name.lower()

    @property
    def run_arg(self) -> str:
        """That tool's one parameter (``command``, ``query``, ``code``)."""
        return self.tool_arg or self.unit


@dataclass(frozen=True)
class Image:
    """A Docker image a language builds (``icplay images build KEY``, or on first use).

    ``context``: the build context folder; a plug-in names one inside its own package
    (``str(Path(__file__).parent / "image")``) and ``dockerfile`` is relative to it.
    None: icplay's repository root (its ``docker/`` folder).
    """

    key: str          # "bash": what `icplay images build` takes
    tag: str          # "icplay-bash:latest"
    dockerfile: str   # relative to the build context
    description: str = ""
    context: str | None = None


@dataclass(frozen=True)
class LanguageSpec:
    """One language: its sandboxes, env, prompts, pane, score renderer and gold policy.

    - ``env(sandbox, image=, timeout=, progress=, recycle=, **options) -> Env``
    - ``env_factory(...)`` (same arguments) -> a callable giving one Env per call with
      ``close()`` and ``stats()``, for parallel workers that share sandbox pools;
      without one, every call makes an env with ``env``.
    - ``default_sandbox() -> str``: without one, the first of ``sandboxes``.
    - ``pane``: the TUI's work pane class (import path into icplay.tui, or a class);
      ``keys_scope`` names the key table of its input ("bash" for a command line,
      "sql" for an editor).
    - ``score_rows(breakdown) -> [(label, value), ...]``: the reward explained, for the
      score screen and ``--plain``; without one, the breakdown's items. ``score_lines(breakdown)
      -> [line, ...]``: line mode's own shorter form, when the language has one (else the rows).
    - ``gold_actions(task) -> [action, ...]``: what the gold policy plays, ending with
      ``submit`` or ``submit ARG`` (default: the gold, then ``submit``).
    - ``uses_image``: ``--image`` applies (a Docker image to run the tasks on).
    - ``input_mode``: how line mode reads one action: "line" (one line), "statement"
      (lines up to one ending with ';'), "block" (a line ending with ':' opens a block
      that a blank line closes, as in Python's REPL); ``input_help`` says so in one line;
      ``prompt`` is line mode's prompt (None: the shell's ``icplay:CWD$``).
    - ``intercode_turn``: one turn of InterCode's experiment loop (``--protocol intercode``
      and ``icplay rescore``; see ``icplay/languages/turns.py``): by default the action
      runs and a submit with no argument scores the state.
    - ``warm() -> None``: loads what the env's first score needs beyond the env itself
      (modules); ``icplay run`` calls it on a helper thread once the model client is made,
      so it happens while the first model request is out, not ahead of it.
    - ``rescore``: the language's entry of ``icplay rescore`` (``entry(args, task_set,
      read_episodes) -> icplay.rescore.engine.RescorePlan``); None: its recordings are not
      rescored. The command lists the languages that have one.
    - ``forks``: a saved episode can be forked (its first k turns replayed into a fresh
      sandbox, then played on: ``icplay view --fork``, the viewer's fork keys).
    - ``result_view``: what the episode viewer shows of a turn's result: "output" (the
      terminal's text) or "rows" (a result grid, with the observation as a note).
    - ``report_note``: a line ``icplay report`` prints under the language's table (what its
      reward column means).
    - ``gold_check`` (``check(tasks, sandbox, progress) -> [(task, why), ...]``) and
      ``gold_check_finds`` (what the found tasks have, ``{sandbox}`` filled in): the
      language's ``icplay tasks --check``.
    - ``submit_scores``: what a bare ``submit`` scores, in words, for the confirmation
      (``icplay/languages/submitting.py``): the last result, or with a submit argument
      (``prompts.submit_arg``) what a submit without one scores.
    """

    name: str
    title: str
    # the sandboxes it runs on; SHELL_SANDBOXES: every kind of icplay.sandbox.registry
    sandboxes: tuple[str, ...]
    env: Ref
    prompts: Prompts
    pane: Ref = "icplay.tui.widgets.panes:BashPane"
    keys_scope: str = "bash"
    env_factory: Ref | None = None
    default_sandbox: Ref | None = None
    score_rows: Callable[[dict], list[tuple[str, str]]] | None = None
    score_lines: Callable[[dict], list[str]] | None = None
    gold_actions: Callable[[Task], list[str]] | None = None
    images: tuple[Image, ...] = ()
    uses_image: bool = False
    description: str = ""
    fresh_state: str = "a fresh sandbox"   # what a retry starts from, in a sentence
    submit_scores: str = "the last action's result"   # what a bare submit scores (languages/submitting.py)
    input_mode: str = "line"
    input_help: str = ""
    prompt: str | None = None
    intercode_turn: TurnRule = RUN_THEN_SUBMIT
    warm: Ref | None = None
    rescore: Ref | None = None
    forks: bool = False
    result_view: str = "output"
    report_note: str = ""
    gold_check: Ref | None = None
    gold_check_finds: str = ""

    def sandbox_names(self) -> tuple[str, ...]:
        """The sandboxes it runs on, a shell language's read from the sandbox registry now."""
        if self.sandboxes == SHELL_SANDBOXES:
            return tuple(registry.names())
        return self.sandboxes

    def pick_sandbox(self) -> str:
        if self.default_sandbox is not None:
            return resolve(self.default_sandbox)()
        if self.sandboxes == SHELL_SANDBOXES:
            return registry.default_name()
        return self.sandboxes[0]

    def make_env(self, sandbox: str, **options) -> Any:
        return resolve(self.env)(sandbox, **options)

    def explain(self, breakdown: dict | None) -> list[tuple[str, str]]:
        breakdown = breakdown or {}
        if self.score_rows is not None:
            return self.score_rows(breakdown)
        return [(str(k), str(v)) for k, v in breakdown.items()]

    def explain_lines(self, breakdown: dict | None) -> list[str]:
        """The reward explained in indented lines (line mode): ``score_lines``, else the rows."""
        if self.score_lines is not None:
            return self.score_lines(breakdown or {})
        return [f"  {label}: " + value.replace("\n", "\n    ") for label, value in self.explain(breakdown)]

    def gold(self, task: Task) -> list[str]:
        if self.gold_actions is not None:
            return self.gold_actions(task)
        return [task.gold, "submit"]
