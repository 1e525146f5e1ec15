"""Bash (InterCode-Bash, NL2Bash): a persistent shell in a Docker container or bwrap."""

from __future__ import annotations

from icplay.languages.spec import SHELL_SANDBOXES, Image, LanguageSpec, Prompts



def score_rows(b: dict) -> list[tuple[str, str]]:
    def changes(items: list) -> str:
        return ", ".join(f"{s} {p}" for s, p in items) if items else "none"

    rows = [("p1 file-system diff", f"{b.get('p1', 0):.2f} / 0.33"),
            ("p2 file contents", f"{b.get('p2', 0):.2f} / 0.33"),
            ("p3 answer similarity", f"{b.get('p3', 0):.2f} / 0.33   (cosine {b.get('cosine', 0):.3f})"),
            ("base", "0.01"),
            ("missing changes", changes(b.get("missing") or [])),
            ("extra changes", changes(b.get("extra") or []))]
    if b.get("different_content"):
        rows.append(("different content", ", ".join(b["different_content"])))
    if b.get("same_content"):
        rows.append(("same content", ", ".join(b["same_content"])))
    return rows


def score_lines(b: dict) -> list[str]:
    """The reward's three parts and the changes that cost it, as line mode prints them."""
    if "p1" not in b:
        return []
    lines = [f"  p1 file system {b['p1']:.2f}   p2 contents {b['p2']:.2f}   p3 answer {b['p3']:.2f}"]
    for key, label in (("missing", "changes you did not make"), ("extra", "changes the gold did not make"),
                       ("different_content", "files with different content")):
        if b.get(key):
            lines.append(f"  {label}: " + ", ".join(" ".join(x) if isinstance(x, (list, tuple)) else str(x)
                                                    for x in b[key]))
    return lines


PROMPTS = Prompts(
    name="Bash",
    setting="Bash shell on Linux (a persistent session: cd, variables and functions carry over between commands)",
    unit="command", units="commands", fence="bash",
    fence_aliases=("bash", "sh", "shell", "console", "shell-session", "zsh", "terminal", "cmd"),
    notes=(
        "- Each command has a 10 second time limit and gets no input on stdin; do not start editors, pagers or\n"
        "  anything interactive (use cat, sed, printf, heredocs).\n"
        "- The files the task is about are under /testbed unless the task says otherwise.\n"
        "- When the task asks for information, the output of your last command is compared with the expected\n"
        "  output, so finish with a command that prints exactly what was asked and nothing else.\n"
        "- When the task asks for a change to files, make exactly that change."
    ),
    bare_code="shell",
)

SPEC = LanguageSpec(
    name="bash", title="Bash", sandboxes=SHELL_SANDBOXES,
    env="icplay.envs.bash:make_bash_env", env_factory="icplay.envs.bash:SharedBashEnvs",
    prompts=PROMPTS,
    pane="icplay.tui.widgets.panes:BashPane", keys_scope="bash",
    score_rows=score_rows, score_lines=score_lines, uses_image=True,
    images=(Image("bash", "icplay-bash:latest", "docker/bash.Dockerfile",
                  "Bash tasks: coreutils and friends, /testbed committed to git"),),
    rescore="icplay.rescore.bash:plan", forks=True,
    submit_scores="the last command's output and the files as they are now",
    description="a persistent Bash shell over a /testbed file system",
)
