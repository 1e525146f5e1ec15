"""The playground's settings: ``$ICPLAY_HOME/config.toml`` (default ``~/.icplay/config.toml``).

Example::

    theme = "textual-light"        # any Textual theme; Ctrl+T switches light/dark
    strict = false                 # strict baselines: no schema browser, no peeking

    [keys]                         # binding id = keys (comma-separated)
    "play.submit" = "ctrl+s,f10"
    "play.interrupt" = "ctrl+c"

    [sql]
    schema_browser = true          # show the tables and columns beside the editor

    [bash]
    history = true                 # keep a command history across tasks

    [human]
    annotator = "ada"              # who plays: recorded in every episode and human turn
                                   #   (--annotator NAME and $ICPLAY_ANNOTATOR win over it)

    [agent]                        # who tries a task from the picker (Ctrl+W) and in icplay watch
    policy = "llm"                 # llm | gold | replay:FILE
    model = "gpt-4o-mini"
    base_url = "http://localhost:8000/v1"
    strategy = "react"
    protocol = "agent"             # agent | intercode
    actions = "tools"              # text (a fenced block, the default) | tools (native tool calls)
    mode = "confirm"               # auto | confirm | human
    max_tokens = 16000             # the request's parameters, as --max-tokens, --temperature (a number
    temperature = "default"        #   or "default"), --reasoning-effort, --seed, --extra-body (a table)
    reasoning_effort = "low"
    extra_body = { top_k = 20 }

Environment overrides: ``ICPLAY_THEME``, ``ICPLAY_STRICT=1``, ``ICPLAY_ANNOTATOR``. A bad file gives one
sentence naming the file and the setting, never a traceback.
"""

from __future__ import annotations

import os
try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]  # the same API under its backport's name
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from icplay.agents.families import MODEL_SETTINGS, model_options
from icplay.paths import home_dir

DARK_THEME = "textual-dark"
LIGHT_THEME = "textual-light"


AGENT_SETTINGS = ("policy", "model", "base_url", "strategy", "protocol", "mode", "actions") + MODEL_SETTINGS


class ConfigError(ValueError):
    """A config file that cannot be used; the message names file and setting."""


@dataclass
class Config:
    theme: str = DARK_THEME
    strict: bool = False
    schema_browser: bool = True
    history: bool = True
    keys: dict[str, str] = field(default_factory=dict)
    agent: dict[str, Any] = field(default_factory=dict)   # [agent]: policy, model, ..., mode, actions, request parameters
    annotator: str | None = None                          # [human] annotator (else $ICPLAY_ANNOTATOR)
    path: Path | None = None

    @property
    def show_schema(self) -> bool:
        return self.schema_browser and not self.strict


def config_path(home: str | Path | None = None) -> Path:
    return Path(home or home_dir()) / "config.toml"


# the settings that are one typed value: (table or None for the top, key, type, Config's field)
_SIMPLE_SETTINGS = ((None, "theme", str, "theme"), (None, "strict", bool, "strict"),
                    ("sql", "schema_browser", bool, "schema_browser"), ("bash", "history", bool, "history"))


def load_config(path: str | Path | None = None, environ: Mapping[str, str] | None = None) -> Config:
    environ = os.environ if environ is None else environ
    path = Path(path) if path is not None else config_path()
    config = Config(path=path)
    settings = _Settings(path, _read_toml(path))
    for table, key, kind, field_name in _SIMPLE_SETTINGS:
        where = key if table is None else f"{table}.{key}"
        found = settings.pick(settings.table(table) if table else settings.data, key, kind, where)
        if found is not None:
            setattr(config, field_name, found)
    _load_human(config, settings)
    _load_agent(config, settings)
    _load_keys(config, settings)
    if environ.get("ICPLAY_THEME"):
        config.theme = environ["ICPLAY_THEME"]
    if environ.get("ICPLAY_STRICT", "").lower() in ("1", "true", "yes"):
        config.strict = True
    if environ.get("ICPLAY_ANNOTATOR"):
        config.annotator = check_annotator(environ["ICPLAY_ANNOTATOR"], "$ICPLAY_ANNOTATOR")
    return config


# -- annotators: who played, as they name themselves (never the OS account) ----------------

ANNOTATOR_MAX = 64
NO_ANNOTATOR_NOTE = ("no annotator set: episodes record none, shown as \"(no annotator)\" (name yourself with "
                     "--annotator NAME, $ICPLAY_ANNOTATOR or config.toml [human] annotator)")


def check_annotator(name: str, where: str = "--annotator") -> str:
    """``name`` stripped, if it can name an annotator (1-64 printable characters); else
    ``ConfigError`` naming ``where``."""
    name = name.strip()
    if not name or len(name) > ANNOTATOR_MAX or not name.isprintable():
        raise ConfigError(f"{where}: an annotator is named by 1-{ANNOTATOR_MAX} printable characters, "
                          f"got {name[:80]!r}")
    return name


def resolve_annotator(given: str | None, config: Config) -> str | None:
    """The annotator of a human front end: ``--annotator``, else $ICPLAY_ANNOTATOR, else
    config.toml's ``[human] annotator`` (both read into ``config``), else None."""
    if given is not None:
        return check_annotator(given)
    return config.annotator


def add_annotator_argument(parser) -> None:
    parser.add_argument("--annotator", metavar="NAME", default=None,
                        help="who plays, recorded in every episode and human turn (default: $ICPLAY_ANNOTATOR, "
                             "else config.toml [human] annotator, else none)")


def _read_toml(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None


class _Settings:
    """The config file's tables, each value checked for its type with a sentence naming it."""

    def __init__(self, path: Path, data: dict[str, Any]):
        self.path, self.data = path, data

    def pick(self, table: dict[str, Any], key: str, kind: Any, where: str) -> Any:
        if key not in table:
            return None
        value = table[key]
        if not isinstance(value, kind):
            wanted = kind.__name__ if isinstance(kind, type) else "string, number or table"
            raise ConfigError(f"{self.path}: setting '{where}' must be a {wanted}, got {type(value).__name__}")
        return value

    def table(self, name: str) -> dict[str, Any]:
        return self.pick(self.data, name, dict, name) or {}


def _load_agent(config: Config, settings: _Settings) -> None:
    agent = settings.table("agent")
    for name in agent:
        if name not in AGENT_SETTINGS:
            raise ConfigError(f"{settings.path}: setting 'agent.{name}' is unknown (one of: {', '.join(AGENT_SETTINGS)})")
        kind: Any = (str, int, float, dict) if name in MODEL_SETTINGS else str
        if (value := settings.pick(agent, name, kind, f"agent.{name}")) is not None:
            config.agent[name] = value
    try:
        model_options(config.agent, lambda key: f"setting 'agent.{key}'")
    except ValueError as exc:
        raise ConfigError(f"{settings.path}: {exc}") from None


def _load_keys(config: Config, settings: _Settings) -> None:
    for binding_id, value in settings.table("keys").items():
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            value = ",".join(value)
        if not isinstance(value, str) or not value.strip():
            raise ConfigError(f"{settings.path}: setting 'keys.{binding_id}' must be a key string such as "
                              "\"ctrl+s,f10\"")
        config.keys[binding_id] = value.replace(" ", "")


def _load_human(config: Config, settings: _Settings) -> None:
    human = settings.table("human")
    for name in human:
        if name != "annotator":
            raise ConfigError(f"{settings.path}: setting 'human.{name}' is unknown (one of: annotator)")
    if (annotator := settings.pick(human, "annotator", str, "human.annotator")) is not None:
        config.annotator = check_annotator(annotator, f"{settings.path}: setting 'human.annotator'")


@dataclass
class AgentChoice:
    """Who works a watched task: the policy (llm | gold | replay:FILE), the model and how it is
    driven. From ``icplay watch``'s options, else the last use, else config.toml ``[agent]``."""

    policy: str = "llm"
    model: str | None = None
    base_url: str | None = None
    strategy: str | None = None
    protocol: str = "agent"
    mode: str = "confirm"
    actions: str = "text"
    max_tokens: Any = None          # the request's parameters (icplay.agents.families.MODEL_SETTINGS)
    temperature: Any = None
    reasoning_effort: Any = None
    seed: Any = None
    extra_body: Any = None

    def model_options(self) -> dict[str, Any]:
        """``ChatModel`` keyword arguments (checked when the config was read)."""
        return model_options({k: getattr(self, k) for k in MODEL_SETTINGS}, lambda key: f"agent.{key}")

    @property
    def label(self) -> str:
        if self.policy == "llm":
            return self.model or "llm"
        return self.policy.split(":", 1)[0] if self.policy.startswith("replay:") else self.policy

    def to_dict(self) -> dict[str, str]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


def last_agent_path(home: str | Path | None = None) -> Path:
    return Path(home or home_dir()) / "watch-last.json"


def agent_choice(config: Config, home: str | Path | None = None) -> AgentChoice:
    """config.toml's ``[agent]`` with the last use on top (what the picker's key starts)."""
    import json

    values = dict(config.agent)
    try:
        last = json.loads(last_agent_path(home).read_text(encoding="utf-8"))
        if isinstance(last, dict):
            values.update({k: v for k, v in last.items() if k in AGENT_SETTINGS
                           and (isinstance(v, str) or k in MODEL_SETTINGS)})
    except (OSError, ValueError):
        pass
    return AgentChoice(**{k: v for k, v in values.items() if k in AGENT_SETTINGS})


def remember_agent(choice: AgentChoice, home: str | Path | None = None) -> None:
    import json

    path = last_agent_path(home)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(choice.to_dict(), indent=1), encoding="utf-8")
    except OSError:
        pass


def annotator_of_args(args, config: Config | None = None, say=None) -> str | None:
    """The annotator a human front end's command line asks for (``resolve_annotator``); when
    there is none, ``say`` (default: stderr) is told so in one line. ``ConfigError`` for a bad name."""
    import sys

    annotator = resolve_annotator(getattr(args, "annotator", None), config if config is not None else load_config())
    if annotator is None:
        (say or (lambda line: print(f"({line})", file=sys.stderr)))(NO_ANNOTATOR_NOTE)
    return annotator
