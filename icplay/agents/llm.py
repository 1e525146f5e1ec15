"""The LLM chat policy: any OpenAI-compatible endpoint through the ``openai`` client.

``ChatModel`` makes one chat completion with icplay's own retry loop (the client's is
turned off, so every attempt is counted and the waits are ours): rate limits (429), server
errors (5xx), timeouts, dropped connections and malformed replies are retried with
exponential backoff and jitter, honouring ``Retry-After``. What retrying cannot fix —
a bad key, an unknown model, a server that never answers, an exhausted quota — becomes an
``AgentError`` with one sentence saying what to do.

Streaming: when the caller wants the reply as it is written (``on_delta``), the request
asks for ``stream=True`` and passes each text delta on; a server that answers with a
plain JSON body instead, or refuses streaming (400), is read the ordinary way from then
on, quietly. Cancelling: with a ``cancel`` event the request runs on a helper thread and
``complete`` raises ``Cancelled`` as soon as the event is set — mid-request (an open
stream is closed; a non-streamed answer that comes later is thrown away) or mid-backoff.

``LLMPolicy`` turns the task and trajectory into chat messages with a strategy, calls the
model, and parses the reply into a ``Proposal`` (an action, ``None`` for submit, or an
*invalid* proposal carrying the retry message when the reply held no command).
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from icplay.agents.context import ContextLimits
from icplay.agents.parsing import parse_reply, retry_message
from icplay.agents.pricing import PriceTable
from icplay.agents.strategies import (build_messages, counted_turns, find_plan, parse_plan, plan_request_messages,
                                      strategy_name)
from icplay.agents.tools import TOOLS, action_protocol, pending_call, refused_tools, reply_proposal, tool_schemas
from icplay.episode import Cancelled, Proposal, Trajectory
from icplay.tasks.model import Task


class AgentError(RuntimeError):
    """A model call that failed; ``fatal`` means no other episode will do better (bad key, no server)."""

    def __init__(self, message: str, fatal: bool = True):
        super().__init__(message)
        self.fatal = fatal


@dataclass
class Completion:
    text: str
    model: str
    prompt_tokens: int | None
    completion_tokens: int | None
    cost: float | None
    latency: float
    attempts: int
    finish_reason: str | None = None

    def usage(self) -> dict[str, Any]:
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                "cost": self.cost, "latency": round(self.latency, 3), "attempts": self.attempts, "calls": 1}


def add_usage(total: dict[str, Any], part: dict[str, Any]) -> dict[str, Any]:
    """Sum usage dicts (one call's, or sums); calls whose figure is unknown (None) are
    counted in ``prompt_tokens_unknown`` / ``completion_tokens_unknown`` / ``cost_unknown``."""
    out = dict(total)
    for key in ("prompt_tokens", "completion_tokens", "cost"):
        value, unknown = part.get(key), part.get(f"{key}_unknown")
        if value is None and unknown is None:
            unknown = part.get("calls") or 0
        if value is not None:
            out[key] = out.get(key, 0) + value
        if unknown:
            out[f"{key}_unknown"] = out.get(f"{key}_unknown", 0) + unknown
    for key in ("calls", "attempts"):
        if part.get(key) is not None:
            out[key] = out.get(key, 0) + part[key]
    if part.get("latency") is not None:
        out["latency"] = round(out.get("latency", 0) + part["latency"], 3)
    return out


def _describe_endpoint(base_url: str | None) -> str:
    return base_url or "api.openai.com"


def _retry_after(exc: Exception) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None) or {}
    for key in ("retry-after-ms", "retry-after"):
        value = headers.get(key)
        if value is None:
            continue
        try:
            seconds = float(value)
        except ValueError:
            continue
        return seconds / 1000 if key.endswith("-ms") else seconds
    return None


def _error_text(exc: Exception) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
        if isinstance(err, str):
            return err
    return str(getattr(exc, "message", None) or exc)


def _error_code(exc: Exception) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict):
            return str(err.get("code") or err.get("type") or "")
    return ""


class ChatModel:
    """One model on one OpenAI-compatible endpoint; thread-safe (episodes share it)."""

    def __init__(self, model: str, base_url: str | None = None, api_key: str | None = None,
                 temperature: float = 0.0, max_tokens: int = 1024, timeout: float = 60.0, retries: int = 6,
                 backoff: float = 1.0, max_backoff: float = 60.0, prices: PriceTable | None = None,
                 client: Any = None, sleep: Callable[[float], None] | None = None, stream: bool = True):
        self.model = model
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        self.api_key = api_key or os.environ.get("OPENAI_API_KEY")
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.prices = prices or PriceTable()
        self._sleep = sleep             # None: wait (cancellably) for real
        self._client = client
        self._lock = threading.Lock()
        self.stream = stream            # stream replies when a caller wants deltas
        self.streams_ok: bool | None = None   # learnt: does the server stream? (None: not tried)

    @property
    def endpoint(self) -> str:
        return _describe_endpoint(self.base_url)

    def client(self):
        with self._lock:
            if self._client is None:
                import openai

                key = self.api_key
                if not key:
                    if self.base_url is None:
                        raise AgentError("no API key: set OPENAI_API_KEY or pass --api-key "
                                         "(or --base-url for a local server that needs none)")
                    key = "icplay-no-key"  # local servers (vLLM, Ollama, llama.cpp) ignore it
                self._client = openai.OpenAI(api_key=key, base_url=self.base_url, timeout=self.timeout,
                                             max_retries=0)
            return self._client

    def _fatal(self, exc: Exception) -> AgentError | None:
        """The one sentence for errors that retrying will not fix, else None."""
        import openai

        where = self.endpoint
        detail = _error_text(exc)[:200]
        if isinstance(exc, openai.AuthenticationError):
            return AgentError(f"the model server at {where} rejected the API key (401: {detail}); "
                              "check OPENAI_API_KEY or --api-key")
        if isinstance(exc, openai.PermissionDeniedError):
            return AgentError(f"the API key may not use model {self.model!r} at {where} (403: {detail})")
        if isinstance(exc, openai.NotFoundError):
            return AgentError(f"model {self.model!r} is not served at {where} (404: {detail}); "
                              "check --model, and that --base-url ends in /v1")
        if isinstance(exc, openai.RateLimitError) and _error_code(exc) == "insufficient_quota":
            return AgentError(f"the account behind the API key at {where} has no quota left (429: {detail})")
        if isinstance(exc, (openai.BadRequestError, openai.UnprocessableEntityError)):
            # a problem with this request (e.g. context too long): this episode fails, not the run
            return AgentError(f"the model server at {where} refused the request ({exc.status_code}: {detail})",
                              fatal=False)
        return None

    def _retryable(self, exc: Exception) -> bool:
        import openai

        if isinstance(exc, (openai.APIConnectionError, openai.RateLimitError, openai.InternalServerError,
                            openai.APIResponseValidationError, openai.ConflictError)):
            return True
        status = getattr(exc, "status_code", None)
        return isinstance(exc, openai.APIStatusError) and status is not None and (status >= 500 or status == 408)

    def _delay(self, attempt: int, exc: Exception) -> float:
        delay = min(self.max_backoff, self.backoff * (2 ** attempt)) * (0.5 + random.random() / 2)
        after = _retry_after(exc)
        if after is not None:
            delay = max(delay, min(after, self.max_backoff))
        return delay

    def complete(self, messages: list[dict], cancel: threading.Event | None = None,
                 on_delta: Callable[[str], None] | None = None,
                 on_retry: Callable[[int, float, str], None] | None = None) -> Completion:
        """One chat completion, retried as needed; ``Cancelled`` when ``cancel`` is set.

        ``on_delta(text)`` receives the reply as it streams; ``on_retry(attempt, delay,
        why)`` is told before each wait between attempts (a UI counts down)."""
        import openai

        client = self.client()
        started = time.monotonic()
        last: Exception | None = None
        for attempt in range(self.retries + 1):
            if cancel is not None and cancel.is_set():
                raise Cancelled()
            try:
                text, finish, prompt, completion, model = self._call(client, messages, cancel, on_delta)
            except Cancelled:
                raise
            except openai.APIError as exc:
                fatal = self._fatal(exc)
                if fatal is not None:
                    raise fatal from None
                if not self._retryable(exc):
                    raise AgentError(f"the model server at {self.endpoint} failed: {_error_text(exc)[:200]}",
                                     fatal=False) from None
                last = exc
            except _MalformedReply as exc:
                last = exc
            except ValueError as exc:   # a body that is not JSON, or JSON of the wrong shape
                last = _MalformedReply(f"unreadable body: {str(exc)[:80]}")
            else:
                model = model or self.model
                cost = self.prices.cost(self.model, prompt, completion)
                if cost is None and model != self.model:
                    cost = self.prices.cost(model, prompt, completion)
                return Completion(text, str(model), prompt, completion, cost, time.monotonic() - started,
                                  attempt + 1, finish)
            if attempt < self.retries:
                delay = self._delay(attempt, last)
                if on_retry is not None:
                    on_retry(attempt + 1, delay, self._why(last))
                self._wait(delay, cancel)
        raise self._gave_up(last)

    def _wait(self, delay: float, cancel: threading.Event | None) -> None:
        if self._sleep is not None:
            self._sleep(delay)
        elif cancel is not None:
            cancel.wait(delay)
        else:
            time.sleep(delay)
        if cancel is not None and cancel.is_set():
            raise Cancelled()

    @staticmethod
    def _why(exc: Exception | None) -> str:
        import openai

        if isinstance(exc, openai.RateLimitError):
            return "rate-limited (429)"
        if isinstance(exc, openai.APITimeoutError):
            return "no answer in time"
        if isinstance(exc, openai.APIConnectionError):
            return "cannot reach the server"
        if isinstance(exc, _MalformedReply):
            return f"unusable reply ({exc})"
        status = getattr(exc, "status_code", None)
        return f"server error ({status})" if status else "failed"

    def _call(self, client: Any, messages: list[dict], cancel: threading.Event | None,
              on_delta: Callable[[str], None] | None) -> tuple[str, str | None, int | None, int | None, str | None]:
        """One attempt; with ``cancel``, on a helper thread so that a cancel returns at once."""
        if cancel is None:
            return self._request(client, messages, on_delta, {}, None)
        box: dict[str, Any] = {}
        handle: dict[str, Any] = {}
        done = threading.Event()

        def work() -> None:
            try:
                box["value"] = self._request(client, messages, on_delta, handle, cancel)
            except BaseException as exc:   # handed to the waiting thread
                box["error"] = exc
            finally:
                done.set()
                if cancel.is_set():        # nobody waits for this answer any more
                    _close_quietly(handle.get("stream"))

        threading.Thread(target=work, name="icplay-model-call", daemon=True).start()
        while not done.wait(0.05):
            if cancel.is_set():
                _close_quietly(handle.get("stream"))
                raise Cancelled()
        if "error" in box:
            raise box["error"]
        if cancel.is_set():
            raise Cancelled()
        return box["value"]

    def _request(self, client: Any, messages: list[dict], on_delta: Callable[[str], None] | None,
                 handle: dict[str, Any], cancel: threading.Event | None):
        import openai

        kwargs = dict(model=self.model, messages=messages, temperature=self.temperature, max_tokens=self.max_tokens)
        if on_delta is not None and self.stream and self.streams_ok is not False:
            try:
                raw = client.chat.completions.with_raw_response.create(
                    **kwargs, stream=True, stream_options={"include_usage": True})
            except openai.BadRequestError:
                self.streams_ok = False     # e.g. a server that knows no stream_options: ask plainly
            else:
                content_type = str(raw.headers.get("content-type", ""))
                if "event-stream" in content_type:
                    self.streams_ok = True
                    return self._read_stream(raw.parse(), on_delta, handle, cancel)
                self.streams_ok = False     # the server answered in one piece
                body = raw.http_response.read()
                try:
                    data = json.loads(body)
                except ValueError as exc:
                    raise _MalformedReply(f"unreadable body: {str(exc)[:80]}") from None
                return self._unpack(_Obj(data) if isinstance(data, dict) else data)
        return self._unpack(client.chat.completions.create(**kwargs))

    def _unpack(self, response: Any):
        text, finish = self._text(response)
        usage = getattr(response, "usage", None)
        prompt = getattr(usage, "prompt_tokens", None) if usage is not None else None
        completion = getattr(usage, "completion_tokens", None) if usage is not None else None
        return text, finish, prompt, completion, getattr(response, "model", None)

    @staticmethod
    def _read_stream(stream: Any, on_delta: Callable[[str], None], handle: dict[str, Any],
                     cancel: threading.Event | None):
        handle["stream"] = stream
        parts: list[str] = []
        finish = model = None
        prompt = completion = None
        try:
            for chunk in stream:
                if cancel is not None and cancel.is_set():
                    raise Cancelled()
                model = getattr(chunk, "model", None) or model
                usage = getattr(chunk, "usage", None)
                if usage is not None:
                    prompt = getattr(usage, "prompt_tokens", None)
                    completion = getattr(usage, "completion_tokens", None)
                for choice in getattr(chunk, "choices", None) or []:
                    if getattr(choice, "index", 0) != 0:
                        continue
                    piece = getattr(getattr(choice, "delta", None), "content", None)
                    if piece:
                        parts.append(piece)
                        on_delta(piece)
                    finish = getattr(choice, "finish_reason", None) or finish
        finally:
            _close_quietly(stream)
        if not parts and finish is None:
            raise _MalformedReply("the stream ended without a reply")
        return "".join(parts), finish, prompt, completion, model

    def _gave_up(self, exc: Exception | None) -> AgentError:
        import openai

        tries = self.retries + 1
        if isinstance(exc, openai.APITimeoutError):
            return AgentError(f"the model server at {self.endpoint} did not answer within {self.timeout:g} s "
                              f"({tries} tries); is it overloaded? (raise --timeout)")
        if isinstance(exc, openai.APIConnectionError):
            return AgentError(f"cannot reach the model server at {self.endpoint} ({tries} tries: {exc}); "
                              "is it running, and is --base-url right?")
        if isinstance(exc, openai.RateLimitError):
            return AgentError(f"the model server at {self.endpoint} kept rate-limiting ({tries} tries, "
                              "429); lower -j or try later")
        if isinstance(exc, _MalformedReply):
            return AgentError(f"the model server at {self.endpoint} sent no usable reply {tries} times ({exc})",
                              fatal=False)
        status = getattr(exc, "status_code", "")
        return AgentError(f"the model server at {self.endpoint} kept failing ({tries} tries, {status}: "
                          f"{_error_text(exc)[:200] if exc else 'stopped'})")

    @staticmethod
    def _text(response: Any) -> tuple[str, str | None]:
        if isinstance(response, str):
            raise _MalformedReply(f"the body is not a chat completion: {response[:80]!r}")
        choices = getattr(response, "choices", None)
        if not choices:
            raise _MalformedReply("the reply has no choices")
        choice = choices[0]
        message = getattr(choice, "message", None)
        if message is None:
            raise _MalformedReply("the reply's first choice has no message")
        content = getattr(message, "content", None)
        return (content if isinstance(content, str) else ""), getattr(choice, "finish_reason", None)


class _MalformedReply(Exception):
    pass


class _Obj:
    """Attribute access over a JSON reply (a non-streamed answer to a streamed request)."""

    def __init__(self, data: Any):
        self._data = data

    def __getattr__(self, name: str) -> Any:
        if not isinstance(self._data, dict) or name not in self._data:
            return None
        value = self._data[name]
        if isinstance(value, dict):
            return _Obj(value)
        if isinstance(value, list):
            return [_Obj(v) if isinstance(v, dict) else v for v in value]
        return value


def _close_quietly(stream: Any) -> None:
    if stream is None:
        return
    try:
        stream.close()
    except Exception:
        pass


@dataclass
class LLMPolicy:
    """Asks a chat model for the next action with a prompting strategy."""

    model: ChatModel
    strategy: str = "tryagain"
    protocol: str = "agent"
    context: ContextLimits = field(default_factory=ContextLimits)
    max_plan_steps: int = 10
    demos: list[str] = field(default_factory=list)   # worked examples for the system message (run --demos)
    actions: str = "text"      # the action protocol: text (a fenced block) or tools (icplay.agents.tools)

    def __post_init__(self):
        self.strategy = strategy_name(self.strategy)
        self.actions = action_protocol(self.actions)

    @property
    def max_turns(self) -> int | None:
        return 1 if self.strategy == "single" else None

    def describe(self) -> dict[str, Any]:
        return {"kind": "llm", "model": self.model.model, "strategy": self.strategy, "protocol": self.protocol,
                "base_url": self.model.base_url, "temperature": self.model.temperature,
                "max_tokens": self.model.max_tokens, "actions": self.actions}

    def propose(self, task: Task, trajectory: Trajectory, cancel: threading.Event | None = None,
                notify: Callable[[str, dict], None] | None = None) -> Proposal:
        """The next action; ``notify("delta", {"text"})`` streams the reply, ``notify("retry",
        {"attempt", "delay", "message"})`` announces a wait; ``Cancelled`` when ``cancel`` is set."""
        on_delta = (lambda text: notify("delta", {"text": text})) if notify is not None else None
        on_retry = ((lambda attempt, delay, why: notify("retry", {"attempt": attempt, "delay": delay, "message": why,
                                                                    "until": time.time() + delay}))
                    if notify is not None else None)
        tools = self.actions == TOOLS
        if tools and (waiting := pending_call(trajectory, task.env)) is not None:
            return waiting         # the next call of the last reply: no model call
        usage: dict[str, Any] = {}
        info: dict[str, Any] = {}
        plan = None
        if self.strategy == "plan":
            plan = find_plan(trajectory)
            if plan is None:
                done = self.model.complete(plan_request_messages(task, trajectory, self.max_plan_steps, self.demos), cancel,
                                           on_delta, on_retry)
                usage = add_usage(usage, done.usage())
                plan = parse_plan(done.text, self.max_plan_steps)
                info["plan"] = plan
                info["plan_raw"] = done.text
        messages = build_messages(task, trajectory, self.strategy, self.protocol, self.context, plan=plan,
                                  demos=self.demos, actions=self.actions)
        if tools:
            try:
                done = self.model.complete(messages, cancel, on_delta, on_retry, tools=tool_schemas(task.env))
            except AgentError as exc:
                refused = None if exc.fatal else refused_tools(str(exc), self.model.endpoint)
                if refused is None:
                    raise
                raise AgentError(refused) from None
        else:
            done = self.model.complete(messages, cancel, on_delta, on_retry)
        usage = add_usage(usage, done.usage())
        info.update({"raw": done.text, "model": done.model, "finish_reason": done.finish_reason, "usage": usage})
        if tools:
            return reply_proposal(done.text, getattr(done, "tool_calls", None), task.env, trajectory, info)
        parsed = parse_reply(done.text, task.env)
        if not parsed.ok:
            info["invalid"] = True
            info["retry_message"] = retry_message(task.env, self.strategy)
            return Proposal("", parsed.thought, done.text, info)
        info["parsed_from"] = parsed.how
        if parsed.is_submit:
            action = "submit" + (f" {parsed.submit_arg}" if parsed.submit_arg else "")
            return Proposal(action if parsed.submit_arg else None, parsed.thought, done.text, info)
        return Proposal(parsed.action, parsed.thought, done.text, info)


__all__ = ["AgentError", "ChatModel", "Completion", "LLMPolicy", "add_usage", "counted_turns"]
