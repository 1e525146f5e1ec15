"""What a CTF task needs besides its query and flag: its files, and whether it can run offline.

A task's files are a folder on the host (``extra["assets"]``), copied to ``/ctf/<id>`` at
the start of every episode (never baked into an image, so InterCode's sets stay where they
live and the bundled set's solution notes never reach a sandbox). A task that needs a
remote server (picoCTF's ``nc host port`` services, downloads) or whose files are absent
cannot be solved offline: it is marked with a reason (``extra["skip"]``) and left out of
runs unless asked for (``--include-remote``), then played with the network on.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from icplay.tasks.model import Task

CTF_ROOT = "/ctf"
# Tools of the icplay-ctf image a task's setup may try to fetch (InterCode task 14 clones binwalk).
IMAGE_TOOLS = frozenset({"binwalk", "sleuthkit", "pycryptodome"})
# Folders never copied into a sandbox (InterCode's image deleted its tasks' solution/ too).
HIDDEN_FOLDERS = frozenset({"solution", "solutions"})

_NC = re.compile(r"\bnc\s+(?:-\w+\s+)*([a-z0-9][\w.-]*\.[a-z]{2,})\s+(\d{2,5})\b", re.I)
_CONNECT = re.compile(r"\bconnect (?:to|with)\s+(?:nc\s+)?([a-z0-9][\w.-]*\.[a-z]{2,})(?:\s+at)?\s+(?:port\s+)?(\d{2,5})\b",
                      re.I)
_URL = re.compile(r"\bhttps?://[^\s'\")]+", re.I)
_DOWNLOAD = re.compile(r"\b(?:wget|curl)\b[^\n]*\bhttps?://", re.I)
_CLONE = re.compile(r"^\s*git clone\s+\S*?([\w-]+?)(?:\.git)?\s*$", re.I)
# a file name the query asks the solver to use: name.ext (.ext.ext), or quoted
_FILE_NAME = re.compile(r"(?<![\w/])[\w-]+(?:\.[A-Za-z0-9]{1,5}){1,3}(?![\w{])")


def mount_path(task: Task) -> str:
    """Where the task's files are inside the sandbox, and where its shell starts."""
    return f"{CTF_ROOT}/{task.id}"


def assets_dir(task: Task) -> Path | None:
    folder = task.extra.get("assets")
    return Path(folder) if folder else None


def setup_of(task: Task) -> str | None:
    setup = task.extra.get("setup")
    return setup if isinstance(setup, str) and setup.strip() else None


def remote_reason(query: str, setup: str | None) -> str | None:
    """Why a task needs the network, in a few words, or None when it can be solved offline."""
    if setup and _DOWNLOAD.search(setup):
        url = _URL.search(setup)
        return f"its setup downloads its files ({url.group(0) if url else 'a URL'})"
    for pattern in (_NC, _CONNECT):
        found = pattern.search(query)
        if found:
            return f"the flag comes from a server ({found.group(1)} port {found.group(2)})"
    url = _URL.search(query)
    if url:
        return f"it needs a web page ({url.group(0)})"
    return None


def cloned_tool(setup: str | None) -> str | None:
    """The tool a ``git clone`` setup fetches (InterCode task 14 clones binwalk), or None."""
    found = _CLONE.match(setup or "")
    return found.group(1).lower() if found else None


def mark(task: Task, assets: Path | None, tools: frozenset[str] = frozenset()) -> Task:
    """The task with its files and offline status filled in (InterCode's records name neither).

    ``tools``: the tools the image provides; a setup that only clones one of them is
    dropped (noted in ``extra["setup_dropped"]``), since the episode has no network.
    """
    extra = dict(task.extra)
    if assets is not None and assets.is_dir():
        extra["assets"] = str(assets)
    setup = setup_of(task)
    tool = cloned_tool(setup)
    if tool and tool in tools:
        extra.pop("setup", None)
        extra["setup_dropped"] = f"{setup} (the image has {tool})"
        setup = None
    reason = extra.get("remote") if isinstance(extra.get("remote"), str) else remote_reason(task.query, setup)
    network = task.network
    if reason:
        extra["remote"] = reason
        extra["skip"] = f"needs a remote server: {reason}"
        network = True
    elif "assets" not in extra and (missing := _FILE_NAME.search(task.query)):
        extra["skip"] = f"its files are not here ({missing.group(0)})"
    return dataclasses.replace(task, extra=extra, network=network)


def skip_reason(task: Task) -> str | None:
    """Why this task is left out of runs by default, or None."""
    reason = task.extra.get("skip")
    return str(reason) if reason else None


def playable(tasks: list[Task], include_remote: bool = False) -> tuple[list[Task], list[tuple[Task, str]]]:
    """(the tasks to play, the ones left out with their reason). ``include_remote`` keeps
    tasks that need a server (played with the network on); missing files are always out."""
    kept, skipped = [], []
    for task in tasks:
        reason = skip_reason(task)
        if reason and not (include_remote and task.extra.get("remote")):
            skipped.append((task, reason))
        else:
            kept.append(task)
    return kept, skipped


def mark_all(tasks: list[Task], assets: Path | None) -> list[Task]:
    """Every task of a set marked (``mark``), its files at ``<assets>/<id>`` when that exists."""
    return [mark(task, assets / task.id if assets is not None else None, IMAGE_TOOLS) for task in tasks]
