"""Which request parameters a model accepts: a small table of families, plus what a refusal taught.

| family            | models (name, any ``provider/`` prefix)  | token budget            | default budget | after a cut, up to | temperature | stop |
|-------------------|------------------------------------------|-------------------------|----------------|--------------------|-------------|------|
| openai-reasoning  | ``o1``, ``o3``, ``o4-mini``…, ``gpt-5*``  | ``max_completion_tokens`` | 16000          | 64000              | not sent    | not sent |
| classic           | everything else                          | ``max_tokens``            | 1024           | 4096               | 0           | not sent |

A reply cut at the token limit is asked again with a raised budget (``raised_budget``).

The table cannot know every deployment name (an Azure deployment is named by its owner),
so a refusal teaches the rest: a 400 whose error names a ``param`` with the code
``unsupported_parameter`` or ``unsupported_value`` (OpenAI's documented shape) drops that
parameter — or renames it when the message says "Use 'X' instead" — and the model keeps
that for the rest of the run (``ParamLearner``). Servers that name the parameter only in
their message are read too, in any of the error shapes ``errors.error_object`` knows:
"Unrecognized request argument supplied: X" (Azure, older OpenAI), "X: Extra inputs are
not permitted" (Anthropic's endpoint, pydantic servers), "Unknown name \"X\"" (Gemini's).
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

from icplay.agents.errors import error_object

REFUSAL_CODES = ("unsupported_parameter", "unsupported_value")
# a refused parameter named only in the message (the name is group 1)
REFUSAL_MESSAGES = (re.compile(r"[Uu]nrecognized request arguments? supplied:\s*'?([A-Za-z_][\w.]*)"),
                    re.compile(r"(?:^|[\s'\"])([A-Za-z_][\w]*)'?:\s*[Ee]xtra inputs are not permitted"),
                    re.compile(r"[Uu]nknown name \"([A-Za-z_][\w]*)\""),
                    re.compile(r"[Uu]nsupported parameter:?\s*'([A-Za-z_][\w]*)'"))
BUDGET_PARAMS = ("max_tokens", "max_completion_tokens")
_USE_INSTEAD = re.compile(r"[Uu]se '([a-z_]+)' instead")


@dataclass(frozen=True)
class Family:
    """What one family of models accepts."""

    name: str
    pattern: str                  # matched against the model name without its provider prefix
    budget_param: str
    default_budget: int
    temperature: bool             # False: the model takes only its default; none is sent
    reasoning: bool               # it reasons before answering (reasoning_effort applies)
    max_budget: int = 4096        # the most a reply cut at the token limit is asked again with

    def matches(self, model: str) -> bool:
        return re.match(self.pattern, model.rsplit("/", 1)[-1], re.I) is not None


FAMILIES: tuple[Family, ...] = (
    Family("openai-reasoning", r"(o\d+($|-)|gpt-5)", "max_completion_tokens", 16000, temperature=False,
           reasoning=True, max_budget=64000),
    Family("classic", r"", "max_tokens", 1024, temperature=True, reasoning=False, max_budget=4096),
)


def family_of(model: str) -> Family:
    return next(f for f in FAMILIES if f.matches(model))


def raised_budget(family: Family, budget: int, chosen: int | None) -> int | None:
    """The budget to ask again with after a reply was cut at ``budget`` tokens: twice as
    much (at least the family's default) up to the family's ceiling, or the user's own
    ``--max-tokens`` when given (a cap icplay does not go past); None when at the ceiling."""
    ceiling = chosen or family.max_budget
    if budget >= ceiling:
        return None
    return min(ceiling, max(2 * budget, family.default_budget))


@dataclass(frozen=True)
class RequestOptions:
    """The user's choices (``--max-tokens`` …); None leaves the family's default."""

    max_tokens: int | None = None
    temperature: float | str | None = None     # a number, "default" (send none) or None (family default)
    reasoning_effort: str | None = None
    seed: int | None = None
    extra_body: dict[str, Any] = field(default_factory=dict)

    def params(self, family: Family) -> dict[str, Any]:
        """The request's parameters for a model of ``family`` (before anything learnt)."""
        out: dict[str, Any] = {family.budget_param: self.max_tokens or family.default_budget}
        if self.temperature is None:
            if family.temperature:
                out["temperature"] = 0.0
        elif self.temperature != "default":
            out["temperature"] = float(self.temperature)
        if self.reasoning_effort:
            out["reasoning_effort"] = self.reasoning_effort
        if self.seed is not None:
            out["seed"] = self.seed
        return out


def parse_temperature(text: str | float | None) -> float | str | None:
    """``--temperature``: a number, or ``default`` (send none: the model's own)."""
    if text is None or isinstance(text, (int, float)):
        return text
    if str(text).strip().lower() == "default":
        return "default"
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"--temperature {text!r}: expected a number or 'default'") from None


def parse_extra_body(text: str | dict | None) -> dict[str, Any]:
    """``--extra-body JSON``: an object merged into every request."""
    import json

    if text is None or text == "":
        return {}
    if isinstance(text, dict):
        return dict(text)
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"--extra-body: not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise ValueError("--extra-body: expected a JSON object, e.g. '{\"top_k\": 20}'")
    return value


@dataclass
class Refusal:
    """A 400 that names one parameter the model does not take."""

    param: str
    code: str
    message: str

    @classmethod
    def of(cls, body: Any) -> "Refusal | None":
        """The refusal an error body (any shape ``errors.error_object`` reads) states, else None."""
        error = error_object(body)
        param, code, message = error.get("param"), error.get("code"), str(error.get("message") or "")
        if param and code in REFUSAL_CODES:
            return cls(str(param), str(code), message)
        for pattern in REFUSAL_MESSAGES:
            found = pattern.search(message)
            if found:
                return cls(found.group(1), "unsupported_parameter", message)
        return None


class ParamLearner:
    """Per model, what refusals taught: parameters to drop or rename (thread-safe, one run)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._rules: dict[str, dict[str, str | None]] = {}   # model -> param -> new name (None: drop)
        self.notes: dict[str, list[str]] = {}

    def apply(self, model: str, params: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            rules = dict(self._rules.get(model, {}))
        out = dict(params)
        for param, new in rules.items():
            if param in out:
                value = out.pop(param)
                if new is not None and new not in out:
                    out[new] = value
        return out

    def learn(self, model: str, refusal: Refusal, sent: dict[str, Any]) -> str | None:
        """Remember what ``refusal`` teaches; the one sentence to say, or None when it teaches nothing new."""
        if refusal.param not in sent:
            return None
        new: str | None = None
        match = _USE_INSTEAD.search(refusal.message)
        if refusal.code == "unsupported_parameter" and match and match.group(1) != refusal.param:
            new = match.group(1)
        with self._lock:
            rules = self._rules.setdefault(model, {})
            if refusal.param in rules:
                return None
            rules[refusal.param] = new
            what = (f"sends {new!r} instead of {refusal.param!r}" if new else
                    f"no longer sends {refusal.param!r}" + (f" (was {sent[refusal.param]!r})"
                                                           if refusal.code == "unsupported_value" else ""))
            note = f"model {model!r} refused {refusal.param!r} ({refusal.code}): icplay {what} for the rest of the run"
            self.notes.setdefault(model, []).append(note)
        return note

    def learnt(self, model: str) -> list[str]:
        with self._lock:
            return list(self.notes.get(model, []))


MODEL_SETTINGS = ("max_tokens", "temperature", "reasoning_effort", "seed", "extra_body")
REASONING_EFFORTS = ("minimal", "none", "low", "medium", "high", "xhigh")


def option_name(key: str) -> str:
    return "--" + key.replace("_", "-")


def model_options(values: dict[str, Any], name: Callable[[str], str] = option_name) -> dict[str, Any]:
    """``ChatModel`` keyword arguments from the options or config.toml's ``[agent]``
    (``max_tokens``, ``temperature``, ``reasoning_effort``, ``seed``, ``extra_body``);
    a bad value raises ``ValueError`` naming the setting as ``name(key)`` shows it."""
    out: dict[str, Any] = {}
    given = {k: v for k, v in values.items() if k in MODEL_SETTINGS and v not in (None, "")}
    for key in ("max_tokens", "seed"):
        if key in given:
            try:
                out[key] = int(str(given[key]))
            except ValueError:
                raise ValueError(f"{name(key)} {given[key]!r}: expected a whole number") from None
    if out.get("max_tokens", 1) < 1:
        raise ValueError(f"{name('max_tokens')} {out['max_tokens']}: expected at least 1")
    if "temperature" in given:
        try:
            out["temperature"] = parse_temperature(given["temperature"])
        except ValueError:
            raise ValueError(f"{name('temperature')} {given['temperature']!r}: expected a number or 'default'") from None
    if "reasoning_effort" in given:
        effort = str(given["reasoning_effort"]).lower()
        if effort not in REASONING_EFFORTS:
            raise ValueError(f"{name('reasoning_effort')} {effort!r}: one of {', '.join(REASONING_EFFORTS)}")
        out["reasoning_effort"] = effort
    if "extra_body" in given:
        try:
            out["extra_body"] = parse_extra_body(given["extra_body"])
        except ValueError as exc:
            raise ValueError(f"{name('extra_body')}: {str(exc).split(': ', 1)[-1]}") from None
    return out


def add_model_arguments(parser: Any) -> None:
    """The options of the request parameters (``run`` and ``watch``); unset ones fall back to
    config.toml's ``[agent]``, then to the model family's defaults."""
    parser.add_argument("--max-tokens", default=None, metavar="N",
                        help="token budget per reply (default: 16000 for OpenAI reasoning models, else 1024)")
    parser.add_argument("--temperature", default=None, metavar="T|default",
                        help="a number, or 'default' to send none (default: 0; none for reasoning models)")
    parser.add_argument("--reasoning-effort", default=None, metavar="EFFORT",
                        help=f"reasoning_effort sent with every request ({', '.join(REASONING_EFFORTS)}; "
                             "default: none sent)")
    parser.add_argument("--seed", default=None, metavar="N", help="seed sent with every request")
    parser.add_argument("--extra-body", default=None, metavar="JSON",
                        help="a JSON object merged into every request, e.g. '{\"top_k\": 20}'")


def model_options_of(args: Any, config_agent: dict[str, Any] | None = None,
                     config_file: str = "config.toml") -> dict[str, Any]:
    """The options given on the command line over config.toml's ``[agent]`` ones."""
    config = model_options(dict(config_agent or {}), lambda key: f"{config_file}: agent.{key}")
    cli = model_options({key: getattr(args, key, None) for key in MODEL_SETTINGS})
    return {**config, **cli}
