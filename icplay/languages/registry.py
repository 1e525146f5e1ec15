"""The one place languages are registered: icplay's own, and third-party ones found
through the ``icplay.envs`` entry point group (``name = "package.module:SPEC"``).

Specs load lazily: listing the names reads only entry point metadata; a spec's module is
imported the first time it is asked for.
"""

from __future__ import annotations

import threading
from importlib.metadata import EntryPoint

from icplay.plugins import load_plugin, plugins
from icplay.languages.spec import LanguageSpec, resolve
from icplay.sandbox.images import ImageSpec, register_image

ENTRY_POINT_GROUP = "icplay.envs"

BUILTIN = {
    "bash": "icplay.languages.bash:SPEC",
    "sql": "icplay.languages.sql:SPEC",
    "python": "icplay.languages.python:SPEC",
    "ctf": "icplay.ctf.spec:SPEC",
    "harbor": "icplay.harbor.spec:SPEC",
}

_lock = threading.Lock()
_loaded: dict[str, LanguageSpec] = {}


class UnknownLanguage(ValueError):
    """No language by that name (the message lists the known ones)."""


def _plugins() -> dict[str, EntryPoint]:
    return plugins(ENTRY_POINT_GROUP, BUILTIN)


def names() -> list[str]:
    """Every language icplay can run: built-ins first, then plug-ins, by name."""
    return list(BUILTIN) + sorted(_plugins())


def get(name: str) -> LanguageSpec:
    """The spec of ``name``, imported on first use."""
    with _lock:
        if name in _loaded:
            return _loaded[name]
    if name in BUILTIN:
        spec = resolve(BUILTIN[name])
    else:
        spec = load_plugin(_plugins(), name, "environment", names, UnknownLanguage)
        if not isinstance(spec, LanguageSpec) or spec.name != name:
            raise UnknownLanguage(f"entry point {name!r} in group {ENTRY_POINT_GROUP} is not a LanguageSpec "
                                  f"named {name!r}")
    _register_images(spec)
    with _lock:
        _loaded.setdefault(name, spec)
        return _loaded[name]


def _register_images(spec: LanguageSpec) -> None:
    for image in spec.images:
        register_image(image.key, ImageSpec(name=image.tag, dockerfile=image.dockerfile,
                                            description=image.description, context=image.context))


def find(name: str) -> LanguageSpec | None:
    """The spec of ``name``, or None (an env of a test, or a plug-in that is gone)."""
    try:
        return get(name)
    except UnknownLanguage:
        return None


def known(name: str) -> bool:
    return name in BUILTIN or name in _plugins()


def all_specs() -> list[LanguageSpec]:
    """Every spec, loaded (for `icplay images`, `doctor`): a plug-in that fails is left out."""
    specs = []
    for name in names():
        try:
            specs.append(get(name))
        except UnknownLanguage:
            continue
    return specs
