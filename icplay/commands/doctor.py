"""``icplay doctor``: check what icplay needs here, one sentence per problem on how to fix it."""

from __future__ import annotations

import shutil
import subprocess

from icplay.languages import all_specs
from icplay.sandbox.base import SandboxError
from icplay.sandbox.images import IMAGES, connect_errors, docker_client, image_exists, image_is_current
from icplay.sandbox.bwrap import bwrap_problem, isolation_report
from icplay.paths import home_dir, intercode_dir
from icplay.tasks.registry import task_sets


# What a command needs is imported inside the function that runs it (said here once for the
# module): `icplay --help` imports every command module and must start fast.


def register(sub) -> None:
    p = sub.add_parser("doctor", help="check Docker, bubblewrap, images and tools")
    p.set_defaults(func=run)


# Tools the bundled Bash tasks use; on bwrap they come from the host's /usr.
BWRAP_TOOLS = ("bash", "git", "find", "grep", "sed", "gawk", "tree", "jq", "file", "python3", "md5sum", "tar", "gzip")


def checks() -> list[tuple[str, bool | None, str]]:
    """(what, ok, detail or fix) for each thing icplay can use; ok None for a note."""
    results: list[tuple[str, bool | None, str]] = []
    no_docker: tuple[type[BaseException], ...] = (SandboxError, *connect_errors())
    try:
        all_specs()   # each language's spec registers its images
        client = docker_client()
        version = client.version().get("Version", "?")
        results.append(("Docker daemon", True, f"answers (engine {version})"))
        for name, spec in IMAGES.items():
            current = image_is_current(client, name)
            state = "missing" if not image_exists(client, spec.name) else "out of date (its Dockerfile or data changed)"
            results.append((f"image {spec.name}", current,
                            "present and current" if current
                            else f"{state}: run `icplay images build {name}` (or it is built on first use)"))
    except no_docker as exc:  # no daemon (SandboxError's one-sentence fix), or one failing as it answers: a row
        results.append(("Docker daemon", False, str(exc)))

    try:
        problem = bwrap_problem()
        results.append(("bubblewrap", problem is None, "can create sandboxes" if problem is None else problem))
        if problem is None:
            results.extend(isolation_report())   # who the action runs as, its limits and its disk
    except (SandboxError, OSError, subprocess.SubprocessError) as exc:   # a bad ICPLAY_BWRAP_* value (its own
                                                                         # sentence), a probe that fails: a row
        results.append(("bubblewrap", False, str(exc)))
    missing = [tool for tool in BWRAP_TOOLS if shutil.which(tool) is None]
    results.append(("host tools for bwrap", not missing,
                    "all present" if not missing else f"missing {', '.join(missing)}: install them with your package manager "
                    "(Debian: apt-get install tree jq file gawk) or use the Docker sandbox"))
    results.append(("SQLite", True, "embedded, always available"))
    results.append(home_check())
    results.append(intercode_check())
    return results


def intercode_check() -> tuple[str, bool | None, str]:
    """Where InterCode's data was found (its sets then list in ``icplay tasks``); not
    finding it is a note, not a problem: icplay's bundled sets need none of it."""
    import os

    root = intercode_dir()
    if root is None:
        told = os.environ.get("ICPLAY_INTERCODE")
        where = (f"ICPLAY_INTERCODE={told} is not a folder" if told
                 else "ICPLAY_INTERCODE is not set and there is no ../shared/intercode beside the checkout")
        return ("InterCode data", None, f"not found ({where}): set ICPLAY_INTERCODE to InterCode's data folder "
                                        "for its Spider, WikiSQL, NL2Bash, MBPP and CTF sets")
    names = [s.name for s in task_sets() if not s.bundled]
    return ("InterCode data", True, f"found at {root} (sets: {', '.join(names) or 'none of its task files'})")


def home_check() -> tuple[str, bool, str]:
    """$ICPLAY_HOME (trajectories, sessions, caches) must be a folder icplay can write."""
    import os
    import tempfile

    home = home_dir()
    try:
        home.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".doctor-", dir=home)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        return ("icplay home", False, f"{home} is not writable ({exc.strerror or exc}): fix its permissions or "
                                      "set ICPLAY_HOME to a writable folder")
    return ("icplay home", True, f"{home} is writable")


def run(args) -> int:
    problems = 0
    for what, ok, detail in checks():   # ok None: a note (something optional not found)
        print(f"{'-- ' if ok is None else 'ok ' if ok else 'XX '} {what}: {detail}")
        problems += ok is False
    print("all good" if not problems else f"{problems} problem{'s' if problems > 1 else ''}: see above")
    return 0 if not problems else 1
