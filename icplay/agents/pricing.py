"""What a model's tokens cost: a small built-in table the user can extend.

Prices are US dollars per million tokens, (input, output). The user's own table is read
from ``$ICPLAY_PRICES`` (a JSON file) or ``~/.icplay/prices.json`` when present, and
``--price MODEL=IN,OUT`` adds entries for one run. Its entries win over the built-in ones::

    {"my-finetune": {"input": 0.3, "output": 1.2}, "llama3:8b": [0, 0]}

A model found nowhere is *unpriced*: its tokens are still counted and its cost shown as
unknown, never guessed and never an error. Dated snapshots (``gpt-4o-2024-08-06``) and
provider prefixes (``openai/gpt-4o``) fall back to the base name.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from icplay.paths import home_dir

# Published list prices (USD per 1M tokens, input/output), standard tier, prompts of ordinary
# length (Gemini Pro models and Claude Sonnet charge more past 200k prompt tokens; cached-input
# discounts are not applied, so a cost here is an upper bound). Read on PRICES_READ from the
# providers' pricing pages (openai.com/api/pricing, claude.com/pricing, ai.google.dev/pricing);
# extend or override in prices.json or with --price.
PRICES_READ = "2026-11-26"
BUILTIN_PRICES: dict[str, tuple[float, float]] = {
    # OpenAI: the gpt-5 family and the o-series (reasoning tokens are billed as output)
    "gpt-5.4": (2.50, 15.00),
    "gpt-5.2": (1.75, 14.00),
    "gpt-5.1": (1.25, 10.00),
    "gpt-5": (1.25, 10.00),
    "gpt-5-mini": (0.25, 2.00),
    "gpt-5-nano": (0.05, 0.40),
    "o1": (15.00, 60.00),
    "o3": (2.00, 8.00),
    "o3-mini": (1.10, 4.40),
    "o4-mini": (1.10, 4.40),
    # OpenAI: classic
    "gpt-4o": (2.50, 10.00),
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-4-turbo": (10.00, 30.00),
    "gpt-4": (30.00, 60.00),
    "gpt-3.5-turbo": (0.50, 1.50),
    # Anthropic: Claude 4.x (from 4.5 on, Opus costs a third of Opus 4/4.1)
    "claude-opus-4-7": (5.00, 25.00),
    "claude-opus-4-6": (5.00, 25.00),
    "claude-opus-4-5": (5.00, 25.00),
    "claude-opus-4-1": (15.00, 75.00),
    "claude-opus-4-0": (15.00, 75.00),
    "claude-opus-4": (15.00, 75.00),
    "claude-sonnet-4-6": (3.00, 15.00),
    "claude-sonnet-4-5": (3.00, 15.00),
    "claude-sonnet-4-0": (3.00, 15.00),
    "claude-sonnet-4": (3.00, 15.00),
    "claude-haiku-4-5": (1.00, 5.00),
    # Google: Gemini 2.5 and 3 (thinking tokens are billed as output)
    "gemini-3.1-pro-preview": (2.00, 12.00),
    "gemini-3-pro-preview": (2.00, 12.00),
    "gemini-3-flash-preview": (0.50, 3.00),
    "gemini-2.5-pro": (1.25, 10.00),
    "gemini-2.5-flash": (0.30, 2.50),
    "gemini-2.5-flash-lite": (0.10, 0.40),
}

DATE_SUFFIX = re.compile(r"-(\d{4}-\d{2}-\d{2}|\d{8}|\d{4}|latest|preview)$")


class PriceTableError(ValueError):
    pass


def _entry(name: str, value, source: str) -> tuple[float, float]:
    try:
        if isinstance(value, dict):
            return float(value["input"]), float(value["output"])
        inp, out = value
        return float(inp), float(out)
    except (KeyError, TypeError, ValueError):
        raise PriceTableError(f"{source}: price of {name!r} must be {{\"input\": X, \"output\": Y}} "
                              "or [X, Y] in dollars per million tokens") from None


def load_user_prices(path: str | Path | None = None) -> dict[str, tuple[float, float]]:
    if path is None:
        env = os.environ.get("ICPLAY_PRICES")
        path = Path(env) if env else home_dir() / "prices.json"
    path = Path(path)
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise PriceTableError(f"{path}: not a JSON price table ({exc})") from None
    if not isinstance(data, dict):
        raise PriceTableError(f"{path}: expected an object mapping model names to prices")
    return {str(k): _entry(k, v, str(path)) for k, v in data.items()}


def parse_price_option(text: str) -> tuple[str, tuple[float, float]]:
    """``MODEL=IN,OUT`` (dollars per million tokens)."""
    name, sep, rest = text.partition("=")
    parts = rest.replace("/", ",").split(",")
    if not sep or not name.strip() or len(parts) != 2:
        raise PriceTableError(f"--price {text!r}: expected MODEL=INPUT,OUTPUT in dollars per million tokens")
    return name.strip(), _entry(name, parts, "--price")


class PriceTable:
    def __init__(self, extra: dict[str, tuple[float, float]] | None = None, user_file: str | Path | None = None,
                 builtin: bool = True):
        self.prices: dict[str, tuple[float, float]] = dict(BUILTIN_PRICES) if builtin else {}
        self.prices.update(load_user_prices(user_file))
        self.prices.update(extra or {})

    def lookup(self, model: str) -> tuple[float, float] | None:
        names = [model, model.split("/")[-1]]
        for name in list(names):
            base = name
            while True:
                stripped = DATE_SUFFIX.sub("", base)
                if stripped == base:
                    break
                base = stripped
                names.append(base)
        for name in names:
            if name in self.prices:
                return self.prices[name]
        return None

    def cost(self, model: str, prompt_tokens: int | None, completion_tokens: int | None) -> float | None:
        """Dollars for one call; None when the model is unpriced or usage is unknown."""
        price = self.lookup(model)
        if price is None or prompt_tokens is None or completion_tokens is None:
            return None
        return (prompt_tokens * price[0] + completion_tokens * price[1]) / 1_000_000
