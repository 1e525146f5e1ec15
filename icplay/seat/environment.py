"""What a seat's app process inherits of the server's environment: what icplay and its
sandboxes need, nothing else.

The server's environment may hold secrets the app never needs at a seat (an API key, a
cloud token, a password in a variable); the app is driven by someone from outside, so it is
started without them. Kept: the locale, paths and terminal, icplay's own settings
(``ICPLAY_*``, not ``ICPLAY_ANNOTATOR``: the seat names the annotator), what reaches Docker
or Podman, and textual-serve's ``TEXTUAL_*`` and screen size.
"""

from __future__ import annotations

from typing import Mapping

KEPT = frozenset({
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TMPDIR", "TERM", "COLORTERM",
    "NO_COLOR", "COLUMNS", "ROWS", "TERM_PROGRAM", "TERM_PROGRAM_VERSION", "VIRTUAL_ENV", "PYTHONPATH",
    "SSL_CERT_FILE", "SSL_CERT_DIR", "CI",
    "DOCKER_HOST", "DOCKER_CONTEXT", "DOCKER_CONFIG", "DOCKER_CERT_PATH", "DOCKER_TLS_VERIFY",
    "DOCKER_API_VERSION", "CONTAINER_HOST", "CONTAINERS_CONF", "CONTAINERS_STORAGE_CONF",
})
KEPT_PREFIXES = ("LC_", "XDG_", "ICPLAY_", "TEXTUAL")
DROPPED = frozenset({"ICPLAY_ANNOTATOR"})


def kept(name: str) -> bool:
    return name not in DROPPED and (name in KEPT or name.startswith(KEPT_PREFIXES))


def kept_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The part of ``environ`` a seat's app is started with."""
    return {name: value for name, value in environ.items() if kept(name)}
