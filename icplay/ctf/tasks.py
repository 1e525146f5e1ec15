"""Kept for code that imports it here: a CTF task's files and offline status live in
``icplay.tasks.ctf`` (the task registry marks CTF tasks as it loads them)."""

from icplay.tasks.ctf import (CTF_ROOT, HIDDEN_FOLDERS, IMAGE_TOOLS, assets_dir, cloned_tool, mark, mark_all,
                              mount_path, playable, remote_reason, setup_of, skip_reason)

__all__ = ["CTF_ROOT", "HIDDEN_FOLDERS", "IMAGE_TOOLS", "assets_dir", "cloned_tool", "mark", "mark_all", "mount_path",
           "playable", "remote_reason", "setup_of", "skip_reason"]
