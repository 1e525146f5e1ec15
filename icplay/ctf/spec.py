"""CTF's language spec: InterCode-CTF's shell over a task's files, scored by the flag."""

from __future__ import annotations

from icplay.languages.spec import SHELL_SANDBOXES, Image, LanguageSpec, Prompts
from icplay.tasks.model import Task
from icplay.tasks.ctf import mount_path



def score_rows(b: dict) -> list[tuple[str, str]]:
    rows = [("submitted", str(b.get("submitted") or "nothing")),
            ("verdict", "correct" if b.get("correct") else "wrong")]
    if b.get("why"):
        rows.append(("why", str(b["why"])))
    return rows


def gold_actions(task: Task) -> list[str]:
    return [f"submit {task.gold}"]


def task_lines(task: Task) -> list[str]:
    return [f"Your working directory, {mount_path(task)}, holds the task's files."]


PROMPTS = Prompts(
    name="Bash",
    setting="Linux shell inside a capture-the-flag challenge (Bash, with Python 3, gcc, gdb, binutils, "
            "xxd, sleuthkit, poppler, imagemagick, exiftool and binwalk)",
    unit="command", units="commands", fence="bash",
    fence_aliases=("bash", "sh", "shell", "console", "shell-session", "zsh", "terminal"),
    notes=(
        "- The task's files are in your working directory (/ctf/<task id>); there is no network.\n"
        "- Each command has a 10 second time limit and gets no input on stdin: no editors, pagers or interactive\n"
        "  programs (run gdb with -batch, python3 with -c or a script, feed input with pipes or here-docs).\n"
        "- The flag usually looks like picoCTF{...} or icplay{...}; if the task says how to wrap the answer, do so.\n"
        "- When you have the flag, reply `submit <flag>`: the whole rest of the line is the flag (case does not\n"
        "  matter). A wrong flag ends the episode, so submit only a flag you have seen or computed."
    ),
    bare_code="shell",
    submit_arg=True, submit_arg_name="flag", submit_arg_help="the flag, exactly as found or computed",
    sandbox_notes={"bwrap": "This sandbox has the host's tools: some of those named above may be missing (check "
                            "with `command -v`)."},
    task_lines=task_lines,
)

SPEC = LanguageSpec(
    name="ctf", title="CTF", sandboxes=SHELL_SANDBOXES,
    env="icplay.ctf.env:make_ctf_env", env_factory="icplay.ctf.env:CtfEnvFactory",
    prompts=PROMPTS,
    pane="icplay.tui.widgets.ctf:CtfPane", keys_scope="bash",
    score_rows=score_rows, gold_actions=gold_actions, uses_image=True,
    images=(Image("ctf", "icplay-ctf:latest", "docker/ctf.Dockerfile",
                  "CTF tasks: InterCode-CTF's tools; each episode copies its task's files to /ctf/<id>"),),
    submit_scores="nothing: no flag was given (reward 0)",
    description="capture the flag: a shell over the task's files at /ctf/<id>; submit <flag>",
    fresh_state="a fresh sandbox with the task's files as they were at the start",
    rescore="icplay.rescore.ctf:plan",
)
