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

Environment overrides: ``ICPLAY_THEME``, ``ICPLAY_STRICT=1``. A bad file gives one
sentence naming the file and the setting, never a traceback.
"""

from __future__ import annotations

import os
try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib
from dataclasses import dataclass, field
from pathlib import Path

from icplay.paths import home_dir

DARK_THEME = "textual-dark"
LIGHT_THEME = "textual-light"


class ConfigError(ValueError):
    """A config file that cannot be used; the message names file and setting."""


@dataclass
class Config:
    theme: str = DARK_THEME
    strict: bool = False
    schema_browser: bool = True
    history: bool = True
    keys: dict[str, str] = field(default_factory=dict)
    path: Path | None = None

    @property
    def show_schema(self) -> bool:
        return self.schema_browser and not self.strict


def config_path(home: str | Path | None = None) -> Path:
    return Path(home or home_dir()) / "config.toml"


def load_config(path: str | Path | None = None, environ: dict[str, str] | None = None) -> Config:
    environ = os.environ if environ is None else environ
    path = Path(path) if path is not None else config_path()
    config = Config(path=path)
    data: dict = {}
    if path.exists():
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{path}: cannot read: {exc}") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: invalid TOML: {exc}") from None

    def pick(table: dict, key: str, kind: type, where: str):
        if key not in table:
            return None
        value = table[key]
        if not isinstance(value, kind):
            raise ConfigError(f"{path}: setting '{where}' must be a {kind.__name__}, got {type(value).__name__}")
        return value

    if (theme := pick(data, "theme", str, "theme")) is not None:
        config.theme = theme
    if (strict := pick(data, "strict", bool, "strict")) is not None:
        config.strict = strict
    sql = pick(data, "sql", dict, "sql") or {}
    if (schema := pick(sql, "schema_browser", bool, "sql.schema_browser")) is not None:
        config.schema_browser = schema
    bash = pick(data, "bash", dict, "bash") or {}
    if (history := pick(bash, "history", bool, "bash.history")) is not None:
        config.history = history
    keys = pick(data, "keys", dict, "keys") or {}
    for binding_id, value in keys.items():
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            value = ",".join(value)
        if not isinstance(value, str) or not value.strip():
            raise ConfigError(f"{path}: setting 'keys.{binding_id}' must be a key string such as \"ctrl+s,f10\"")
        config.keys[binding_id] = value.replace(" ", "")
    if environ.get("ICPLAY_THEME"):
        config.theme = environ["ICPLAY_THEME"]
    if environ.get("ICPLAY_STRICT", "").lower() in ("1", "true", "yes"):
        config.strict = True
    return config
