"""What differs by image engine (Docker, Podman through its Docker-compatible API) for
every container icplay makes on it, and the failures an engine's calls raise."""

from __future__ import annotations

import json
from typing import Any


def engine_errors(*also: type[BaseException]) -> tuple[type[BaseException], ...]:
    """What a call to an engine raises when the engine refuses or is gone: docker-py's
    errors, and requests' connection errors (OSError, as is an answer that is not JSON);
    ``also``: the caller's own named failures besides."""
    import docker.errors

    return (docker.errors.DockerException, OSError, *also)


def engine_message(exc: BaseException) -> str:
    """An engine's refusal in one line (its explanation when it gave one)."""
    text = getattr(exc, "explanation", None) or str(exc) or type(exc).__name__
    return " ".join(str(text).split())[:300]


class EngineRules:
    """What an engine needs of every container icplay makes on it: Docker's, nothing beyond
    its defaults (Podman's in podman.py)."""

    # the ``ps`` arguments its process list takes (None: its default)
    top_args: str | None = None

    def ulimits(self) -> list[Any]:
        """Resource limits every container is given, the sandboxes' and any other."""
        return []

    def security_opt(self) -> list[str]:
        """Security options of icplay's images' containers beyond no-new-privileges (none:
        Docker's default seccomp profile already refuses namespaces and mounts)."""
        return []

    def seccomp_option(self, profile: dict[str, Any]) -> str:
        """The security option that applies a seccomp profile (Docker takes its text)."""
        return "seccomp=" + json.dumps(profile)
