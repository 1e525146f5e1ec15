"""Languages (action spaces): one ``LanguageSpec`` each, registered in ``registry``.

``make_env`` is the one place that turns a language and a sandbox name into an Env, so
the CLI, the runner, the library and the TUI all build environments the same way.
"""

from __future__ import annotations

from typing import Any, Callable

from icplay.envs.admission import Admission, default_bound
from icplay.envs.admission import AdmittedEnv
from icplay.envs.base import Env
from icplay.languages.registry import ENTRY_POINT_GROUP, UnknownLanguage, all_specs, find, get, known, names
from icplay.languages.spec import SHELL_SANDBOXES, Image, LanguageSpec, Prompts, resolve
from icplay.languages.turns import RUN_THEN_SUBMIT, TurnPlan, TurnRule
from icplay.sandbox.base import SandboxError
from icplay.sandbox import registry

__all__ = ["LanguageSpec", "Prompts", "Image", "resolve", "get", "find", "names", "known", "all_specs", "make_env",
           "EnvFactory", "default_sandbox", "checked_sandbox", "sandboxes", "UnknownLanguage",
           "ENTRY_POINT_GROUP", "TurnPlan", "TurnRule", "intercode_turn"]


def intercode_turn(env_name: str) -> TurnRule:
    """How InterCode's experiment loop scored one turn of ``env_name`` (run, then submit, when
    the language is unknown)."""
    try:
        return get(env_name).intercode_turn
    except UnknownLanguage:
        return RUN_THEN_SUBMIT


def sandboxes(env_name: str) -> tuple[str, ...]:
    return get(env_name).sandbox_names()


def sandbox_choices() -> list[str]:
    """Every sandbox some language runs on (the CLI's ``--sandbox`` choices): the shell
    sandboxes of the registry first, then the others (SQL's sqlite, mysql)."""
    found = list(registry.names())
    for spec in all_specs():
        found += [name for name in spec.sandbox_names() if name not in found]
    return found


def shell_sandboxes() -> list[str]:
    """The registry's shell sandboxes (Bash, Python, CTF run on each)."""
    return registry.names()


def add_sandbox_argument(parser: Any, purpose: str = "") -> None:
    """``--sandbox``, its choices and help read from the registries (``purpose``: a note after the help)."""
    shell = " or ".join(shell_sandboxes())
    others = "; ".join(f"{spec.name}: {' or '.join(spec.sandbox_names())}" for spec in all_specs()
                       if spec.sandboxes != SHELL_SANDBOXES)
    parser.add_argument("--sandbox", default=None, choices=sandbox_choices(), metavar="SANDBOX",
                        help=f"bash, python, ctf: {shell}; {others}{purpose} (default: the language's)")


def default_sandbox(env_name: str) -> str:
    """The sandbox ``env_name`` runs on when none is named (Bash: Docker if a daemon answers)."""
    return get(env_name).pick_sandbox()


def checked_sandbox(env_name: str, sandbox: str | None) -> str:
    """``sandbox`` (or the default), or a SandboxError naming the ones ``env_name`` runs on."""
    try:
        spec = get(env_name)
    except UnknownLanguage as exc:
        raise SandboxError(str(exc)) from None
    sandbox = sandbox or spec.pick_sandbox()
    if sandbox not in spec.sandbox_names():
        raise SandboxError(f"{env_name} runs on {' or '.join(spec.sandbox_names())}, not {sandbox!r}")
    return sandbox


def make_env(env_name: str, sandbox: str | None = None, image: str | None = None,
             timeout: float | None = None, progress: Callable[[str], None] | None = None,
             recycle: bool = True, **options) -> Env:
    """A ready Env for ``env_name`` on ``sandbox`` (default: see ``default_sandbox``).

    ``recycle=False`` gives every Bash episode on Docker a new container instead of a
    used one proved pristine again (see ``icplay/sandbox/recycle.py``).
    """
    sandbox = checked_sandbox(env_name, sandbox)
    return get(env_name).make_env(sandbox, image=image, timeout=timeout, progress=progress, recycle=recycle,
                                  **options)


class EnvFactory:
    """Envs for parallel workers (``icplay run -j N``), one per call.

    A language with an ``env_factory`` shares what it can between the envs (Bash: one set
    of sandbox pools and gold runs); others get a new env per call. ``close()`` after the
    envs are closed.
    """

    def __init__(self, env_name: str, sandbox: str | None = None, image: str | None = None,
                 timeout: float | None = None, progress: Callable[[str], None] | None = None,
                 recycle: bool = True, max_active: int | None = None, **options):
        self.env_name = env_name
        self.sandbox = checked_sandbox(env_name, sandbox)
        # env calls executing at once over all its envs (icplay/envs/admission.py)
        self.admission = Admission(max_active if max_active is not None else default_bound(self.sandbox))
        self.image, self.timeout, self.progress, self.recycle, self.options = image, timeout, progress, recycle, options
        self._shared: Any = None

    def _arguments(self) -> dict[str, Any]:
        return dict(image=self.image, timeout=self.timeout, progress=self.progress, recycle=self.recycle,
                    **self.options)

    def __call__(self) -> Env:
        return AdmittedEnv(self._make(), self.admission)

    def _make(self) -> Env:
        spec = get(self.env_name)
        if spec.env_factory is None:
            return spec.make_env(self.sandbox, **self._arguments())
        if self._shared is None:
            self._shared = resolve(spec.env_factory)(self.sandbox, **self._arguments())
        return self._shared()

    def stats(self) -> dict[str, int]:
        return self._shared.stats() if self._shared is not None else {}

    def close(self) -> None:
        shared, self._shared = self._shared, None
        if shared is not None:
            shared.close()
