"""Plug-ins by entry point: the one way the language and sandbox registries find and load
what other packages add (a plug-in never replaces a built-in name)."""

from __future__ import annotations

from importlib.metadata import EntryPoint, entry_points
from typing import Any, Callable, Collection


# Each group is read once per process: reading entry points scans every installed package's
# metadata (~70 ms with 200 packages), and the command line asks some 45 times while it
# builds its parser. Keyed by the reader too, so that a test's stand-in is read afresh.
_READ: dict[tuple[Any, str], tuple[EntryPoint, ...]] = {}


def plugins(group: str, builtin: Collection[str]) -> dict[str, EntryPoint]:
    """The entry points of ``group`` by name, leaving out the built-in names."""
    key = (entry_points, group)
    found = _READ.get(key)
    if found is None:
        found = _READ[key] = tuple(entry_points(group=group))
    return {ep.name: ep for ep in found if ep.name not in builtin}


def load_plugin(found: dict[str, EntryPoint], name: str, what: str, known: Callable[[], list[str]],
                error: type[Exception]) -> Any:
    """The object entry point ``name`` names; ``error`` in one sentence when there is no such
    entry point (naming the ``known`` ones) or its package fails to load. ``what``: the
    thing a name stands for ("sandbox", "environment")."""
    plugin = found.get(name)
    if plugin is None:
        raise error(f"no {what} {name!r} (known: {', '.join(known())})")
    try:
        return plugin.load()
    except Exception as exc:   # a third-party package's import may raise anything: one sentence naming it
        raise error(f"the {name!r} {what}'s package failed to load: {type(exc).__name__}: {exc}") from None
