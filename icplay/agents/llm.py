"""The LLM chat policy: any OpenAI-compatible endpoint through the ``openai`` client.

``ChatModel`` makes one chat completion with icplay's own retry loop (the client's is
turned off, so every attempt is counted and the waits are ours): rate limits (429), server
errors (5xx, and error chunks in the middle of a stream), timeouts, dropped connections and
malformed replies are retried with exponential backoff and jitter, honouring
``Retry-After``. What retrying cannot fix — a bad key, an unknown model, a refused
connection, an exhausted quota — becomes an ``AgentError`` with one sentence saying what
to do, at once.

Parameters: the model's family (``families``) decides the token budget's name and default
and whether a temperature is sent; a 400 naming an unsupported parameter drops or renames
it, retries, and is remembered for the model for the rest of the run (``learnt``). A prompt
longer than the model's context is a ``ContextTooLong`` (the policy trims and retries).

Streaming: when the caller wants the reply as it is written (``on_delta``, and
``on_reasoning`` for the model's thinking), the request asks for ``stream=True``; a server
that answers with a plain JSON body instead, or refuses with a 400 that names streaming, is
read the ordinary way from then on, quietly. Cancelling: with a ``cancel`` event the request
runs on a helper thread and ``complete`` raises ``Cancelled`` as soon as the event is set —
mid-request (an open stream is closed; a non-streamed answer that comes later is thrown
away) or mid-backoff.

``LLMPolicy`` turns the task and trajectory into chat messages with a strategy, calls the
model, and parses the reply into a ``Proposal`` (an action, ``None`` for submit, or an
*invalid* proposal carrying the retry message when the reply held no command).
"""

from __future__ import annotations

import os
import random
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from icplay.agents.context import ContextLimits, estimate_tokens
from icplay.agents.endpoints import azure_deployment, make_client
from icplay.agents.errors import error_code, error_message, exception_body, names_bad_key
from icplay.agents.attempt import AttemptTimedOut, FailedReply, bounded, read_body, read_stream
from icplay.agents.cuts import budget_after_cut, cut_of, cut_proposal
from icplay.agents.families import BUDGET_PARAMS, ParamLearner, Refusal, RequestOptions, family_of
from icplay.agents.parsing import parse_reply, retry_message
from icplay.agents.pricing import PriceTable
from icplay.agents.records import request_record, sent_messages
from icplay.agents.replies import MalformedReply, ReplyReader, usage_numbers
from icplay.agents.strategies import (build_messages, counted_turns, find_plan, parse_plan, plan_request_messages,
                                      strategy_name)
from icplay.agents.tokens import count_prompt, count_reply, encoding_for
from icplay.agents.tools import TOOLS, action_protocol, pending_call, reply_proposal, tool_schemas
from icplay.episode import AgentError, Cancelled, Proposal, Trajectory, add_usage
from icplay.tasks.model import Task


class ContextTooLong(AgentError):
    """The server said the prompt does not fit the model's context (``limit`` / ``requested`` when it said)."""

    def __init__(self, message: str, limit: int | None = None, requested: int | None = None):
        super().__init__(message, fatal=False)
        self.limit, self.requested = limit, requested


@dataclass
class Completion:
    """One model call: the reply's parts and what it cost."""

    text: str                              # the answer (reasoning and think tags taken out)
    model: str
    prompt_tokens: int | None
    completion_tokens: int | None
    cost: float | None
    latency: float
    attempts: int
    finish_reason: str | None = None
    reasoning: str = ""                    # what the model thought (any of the fields servers use)
    tool_calls: list[dict[str, str]] = field(default_factory=list)   # [{"id", "name", "arguments"}]
    reasoning_tokens: int | None = None
    cached_tokens: int | None = None
    ttft: float | None = None              # seconds to the first streamed piece (None: not streamed)
    response_id: str | None = None
    params: dict[str, Any] = field(default_factory=dict)   # what the request sent besides the messages
    counted: str | None = None             # tokens counted here, how (tokens.ESTIMATE, tiktoken:…); None: the server's
    failures: list[str] = field(default_factory=list)      # why each failed attempt before this reply failed

    @property
    def truncated(self) -> bool:
        return self.finish_reason == "length"

    def usage(self) -> dict[str, Any]:
        out = {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
               "cost": self.cost, "latency": round(self.latency, 3), "attempts": self.attempts, "calls": 1}
        for key in ("reasoning_tokens", "cached_tokens"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        if self.counted:
            out["estimated_calls"] = 1
        return out

    def response(self) -> dict[str, Any]:
        """The reply's record for the turn (what a debugging engineer asks for)."""
        return {"id": self.response_id, "model": self.model, "finish_reason": self.finish_reason,
                "usage": {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                          "reasoning_tokens": self.reasoning_tokens, "cached_tokens": self.cached_tokens},
                "latency": round(self.latency, 3), "ttft": None if self.ttft is None else round(self.ttft, 3),
                "cost": self.cost, "attempts": self.attempts,
                **({"usage_counted": self.counted} if self.counted else {}),
                **({"failed_attempts": self.failures} if self.failures else {})}


def _describe_endpoint(base_url: str | None) -> str:
    return base_url or "api.openai.com"


def _retry_after(exc: Exception | None) -> float | None:
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


_CONTEXT_WORDS = re.compile(r"context length|context window|maximum context|too many tokens|prompt is too long|"
                            r"exceeds the context", re.I)
_NUMBERS = re.compile(r"(\d[\d,]*)\s*tokens?", re.I)


def _context_refusal(exc: Exception) -> tuple[int | None, int | None] | None:
    """(limit, requested) of a 400 saying the prompt is too long (None: not that)."""
    code, text = error_code(exc), error_message(exc)
    if code != "context_length_exceeded" and not _CONTEXT_WORDS.search(text):
        return None
    numbers = [int(n.replace(",", "")) for n in _NUMBERS.findall(text)]
    limit = numbers[0] if numbers else None
    requested = max(numbers[1:]) if len(numbers) > 1 else None
    return limit, requested


def _names_streaming(exc: Exception) -> bool:
    err = exception_body(exc)
    return "stream" in str(err.get("param") or "") or "stream" in error_message(exc).lower()


def _refused_connection(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            return False
        if isinstance(seen, ConnectionRefusedError) or "connection refused" in str(seen).lower():
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _tool_request(tools: list[dict] | None, tool_choice: Any) -> dict[str, Any]:
    """The request's tool fields, only those the caller gave."""
    extra: dict[str, Any] = {}
    if tools:
        extra["tools"] = tools
    if tool_choice is not None:
        extra["tool_choice"] = tool_choice
    return extra


def _as_reply_failure(exc: Exception) -> Exception:
    """A reply that could not be read, as the retry loop counts it: a ValueError is a body
    that is not JSON, or JSON of the wrong shape."""
    if isinstance(exc, ValueError):
        return MalformedReply(f"unreadable body: {str(exc)[:80]}")
    return exc


REPLY_FAILURES = (MalformedReply, FailedReply, AttemptTimedOut, ValueError)


class ChatModel:
    """One model on one OpenAI-compatible endpoint; thread-safe (episodes share it)."""

    def __init__(self, model: str, base_url: str | None = None, api_key: str | None = None,
                 temperature: float | str | None = None, max_tokens: int | None = None, timeout: float = 300.0,
                 retries: int = 6, backoff: float = 1.0, max_backoff: float = 60.0, prices: PriceTable | None = None,
                 client: Any = None, sleep: Callable[[float], None] | None = None, stream: bool = True,
                 reasoning_effort: str | None = None, seed: int | None = None,
                 extra_body: dict[str, Any] | None = None):
        self.model = model
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        self.api_key = api_key or os.environ.get("OPENAI_API_KEY")
        self.azure = azure_deployment(self.base_url)     # an Azure deployment URL (ValueError when half one)
        if self.azure is not None and not self.api_key:
            self.api_key = os.environ.get("AZURE_OPENAI_API_KEY")
        self.options = RequestOptions(max_tokens, temperature, reasoning_effort, seed, dict(extra_body or {}))
        self.family = family_of(model)
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.prices = prices or PriceTable()
        self.learner = ParamLearner()
        self.on_note: Callable[[str], None] | None = None   # told each thing learnt (once; e.g. the run's log)
        self._sleep = sleep             # None: wait (cancellably) for real
        self._client = client
        self._lock = threading.Lock()
        self.stream = stream            # stream replies when a caller wants deltas
        self.streams_ok: bool | None = None   # learnt: does the server stream? (None: not tried)

    @property
    def temperature(self) -> float | str | None:
        return self.params().get("temperature", "default")

    @property
    def max_tokens(self) -> int:
        return self.options.max_tokens or self.family.default_budget

    def params(self) -> dict[str, Any]:
        """The parameters sent with every request now (family, options, then what refusals taught)."""
        return self.learner.apply(self.model, self.options.params(self.family))

    def learnt(self) -> list[str]:
        return self.learner.learnt(self.model)

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"family": self.family.name, "params": self.params()}
        if self.options.extra_body:
            out["extra_body"] = self.options.extra_body
        if self.learnt():
            out["learnt"] = self.learnt()
        return out

    @property
    def endpoint(self) -> str:
        return _describe_endpoint(self.base_url)

    def key(self) -> str:
        """The API key to send; ``AgentError`` in one sentence when there is none and the
        endpoint needs one (a check that costs no import: ``icplay run`` makes it at once)."""
        if self.api_key:
            return self.api_key
        if self.base_url is None or self.azure is not None:
            raise AgentError("no API key: set OPENAI_API_KEY or pass --api-key "
                             + ("(or $AZURE_OPENAI_API_KEY)" if self.azure else
                                "(or --base-url for a local server that needs none)"))
        return "icplay-no-key"  # local servers (vLLM, Ollama, llama.cpp) ignore it

    def client(self):
        with self._lock:
            if self._client is None:
                self._client = make_client(self.base_url, self.key(), self.timeout)
            return self._client

    def _fatal(self, exc: Exception, tools_sent: bool = False) -> AgentError | None:
        """The one sentence for errors that retrying will not fix, else None."""
        import openai

        where = self.endpoint
        detail = error_message(exc)[:200]
        if isinstance(exc, openai.APIConnectionError) and _refused_connection(exc):
            return AgentError(f"nothing is listening at {where} (connection refused); "
                              "is the model server running, and is --base-url right?")
        status = getattr(exc, "status_code", None)
        if isinstance(exc, openai.AuthenticationError) or (status in (400, 403) and names_bad_key(exc)):
            return AgentError(f"the model server at {where} rejected the API key ({status}: {detail}); "
                              "check OPENAI_API_KEY or --api-key")
        if isinstance(exc, openai.PermissionDeniedError):
            return AgentError(f"the API key may not use model {self.model!r} at {where} (403: {detail})")
        if isinstance(exc, openai.NotFoundError):
            return AgentError(f"model {self.model!r} is not served at {where} (404: {detail}); "
                              "check --model, and that --base-url ends in /v1")
        if isinstance(exc, openai.RateLimitError) and error_code(exc) == "insufficient_quota":
            return AgentError(f"the account behind the API key at {where} has no quota left (429: {detail})")
        if isinstance(exc, (openai.BadRequestError, openai.UnprocessableEntityError)):
            return self._refused_request(exc, detail, tools_sent)
        return None

    def _refused_request(self, exc: Any, detail: str, tools_sent: bool) -> AgentError:
        """A 400 or 422: a prompt too long for the context, tools the server does not take, or
        else a problem with this request alone (this episode fails, not the run)."""
        context = _context_refusal(exc)
        if context is not None:
            return ContextTooLong(f"the prompt does not fit model {self.model!r}'s context ({detail})", *context)
        if tools_sent and "tool" in (detail + str(exception_body(exc).get("param") or "")).lower():
            return AgentError(f"the model server at {self.endpoint} refused tool calling ({detail}); "
                              "use --actions text")
        return AgentError(f"the model server at {self.endpoint} refused the request ({exc.status_code}: {detail})",
                          fatal=False)

    def _retryable(self, exc: Exception) -> bool:
        import openai

        if isinstance(exc, (openai.APIConnectionError, openai.RateLimitError, openai.InternalServerError,
                            openai.APIResponseValidationError, openai.ConflictError, AttemptTimedOut, FailedReply)):
            return True
        status = getattr(exc, "status_code", None)
        return isinstance(exc, openai.APIStatusError) and status is not None and (status >= 500 or status == 408)

    def _delay(self, attempt: int, exc: Exception | None) -> float:
        delay = min(self.max_backoff, self.backoff * (2 ** attempt)) * (0.5 + random.random() / 2)
        after = _retry_after(exc)
        if after is not None:
            delay = max(delay, min(after, self.max_backoff))
        return delay

    def _learn(self, exc: Exception, sent: dict[str, Any], streaming: bool) -> bool:
        """True when ``exc`` (a 400) taught something and the request is worth sending again."""
        import openai

        if not isinstance(exc, openai.BadRequestError):
            return False
        if streaming and _names_streaming(exc):
            self.streams_ok = False     # e.g. a server that knows no stream_options: ask plainly
            return True
        refusal = Refusal.of(exception_body(exc))
        if refusal is None:
            return False
        note = self.learner.learn(self.model, refusal, sent)
        if note is None:
            return False
        if self.on_note is not None:
            self.on_note(note)
        return True

    def complete(self, messages: list[dict], cancel: threading.Event | None = None,
                 on_delta: Callable[[str], None] | None = None,
                 on_retry: Callable[[int, float, str], None] | None = None, *,
                 on_reasoning: Callable[[str], None] | None = None,
                 tools: list[dict] | None = None, tool_choice: Any = None, budget: int | None = None) -> Completion:
        """One chat completion, retried as needed; ``Cancelled`` when ``cancel`` is set (its
        ``usage`` holds the tokens the cut call is estimated to have cost).

        ``on_delta(text)`` receives the answer as it streams and ``on_reasoning(text)`` the
        model's thinking; ``on_retry(attempt, delay, why)`` is told before each wait between
        attempts (a UI counts down). ``tools`` / ``tool_choice`` go into the request as given;
        ``budget`` replaces the reply's token budget for this call."""
        import openai

        client = self.client()
        call = _CallState(time.monotonic(), _tool_request(tools, tool_choice), tools)
        attempt = lessons = 0
        while attempt <= self.retries:
            self._stop_with_usage(cancel, call, messages)
            params = with_budget(self.params(), budget)
            streaming = self._streams(on_delta is not None or on_reasoning is not None)
            call.attempt_started = time.monotonic()
            reader = ReplyReader(on_delta, on_reasoning)
            try:
                self._call(client, messages, {**params, **call.extra}, streaming, cancel, reader)
            except Cancelled:
                call.spend(self._cut_usage(messages, tools, reader, sent=True))
                raise Cancelled(usage=call.spent) from None
            except openai.APIError as exc:
                if lessons < 8 and self._learn(exc, params, streaming):
                    lessons += 1         # not a failure: the same attempt again, corrected
                    continue
                self._raise_unless_retryable(exc, tools_sent=bool(tools))
                call.fail(exc, self._why(exc))
            except REPLY_FAILURES as exc:
                call.fail(_as_reply_failure(exc), self._why(_as_reply_failure(exc)))
                if not reader.empty:     # the model wrote (and the server billed) part of a reply
                    call.spend(self._cut_usage(messages, tools, reader, sent=True))
            else:
                return self._completion(reader, params, call, attempt + 1, messages)
            if attempt < self.retries:
                self._pause_before_retry(attempt, call.last, on_retry, cancel, call, messages)
            attempt += 1
        raise self._gave_up(call.last)

    def _stop_with_usage(self, cancel: threading.Event | None, call: "_CallState", messages: list[dict]) -> None:
        if cancel is not None and cancel.is_set():
            raise Cancelled(usage=call.spent)

    def _cut_usage(self, messages: list[dict], tools: list[dict] | None, reader: ReplyReader,
                   sent: bool) -> dict[str, Any]:
        """What a call cut short cost, counted here (the server never said): the prompt, and
        the part of the reply that arrived."""
        method, encoder = encoding_for(self.model)
        text, reasoning = reader.parts()
        prompt = count_prompt(messages, tools, encoder) if sent else 0
        completion = count_reply(text, reasoning, reader.tool_calls(), encoder)
        return {"prompt_tokens": prompt, "completion_tokens": completion,
                "cost": self.prices.cost(self.model, prompt, completion), "calls": 0, "estimated_calls": 1,
                "counted": method}

    def _streams(self, someone_listens: bool) -> bool:
        """Stream the reply when someone listens to it and the server has not shown it cannot."""
        return someone_listens and self.stream and self.streams_ok is not False

    def _raise_unless_retryable(self, exc: Exception, tools_sent: bool) -> None:
        """A server error that another attempt cannot mend ends the call here."""
        fatal = self._fatal(exc, tools_sent=tools_sent)
        if fatal is not None:
            raise fatal from None
        if not self._retryable(exc):
            raise AgentError(f"the model server at {self.endpoint} failed: {error_message(exc)[:200]}",
                             fatal=False) from None

    def _pause_before_retry(self, attempt: int, last: Exception | None,
                            on_retry: Callable[[int, float, str], None] | None,
                            cancel: threading.Event | None, call: "_CallState", messages: list[dict]) -> None:
        """Wait out the back-off before the next attempt, telling ``on_retry`` first."""
        delay = self._delay(attempt, last)
        if on_retry is not None:
            on_retry(attempt + 1, delay, self._why(last))
        self._wait(delay, cancel)
        self._stop_with_usage(cancel, call, messages)

    def _completion(self, reader: ReplyReader, params: dict[str, Any], call: "_CallState", attempts: int,
                    messages: list[dict]) -> Completion:
        text, reasoning = reader.parts()
        usage = usage_numbers(reader.usage)
        model = str(reader.model or self.model)
        counted = self._count_missing(usage, reader, messages, call.tools)
        prompt, completion = usage["prompt_tokens"], usage["completion_tokens"]
        cost = usage["cost"] if usage["cost"] is not None else self._priced(model, prompt, completion)
        if call.spent:                # attempts cut short before this one cost tokens too
            prompt, completion = prompt + call.spent["prompt_tokens"], completion + call.spent["completion_tokens"]
            counted = counted or call.spent.get("counted")
            if cost is not None:
                cost += call.spent.get("cost") or 0.0
        ttft = None if reader.first_piece_at is None else reader.first_piece_at - call.attempt_started
        return Completion(text, model, prompt, completion, cost, time.monotonic() - call.started, attempts,
                          reader.finish_reason, reasoning, reader.tool_calls(), usage["reasoning_tokens"],
                          usage["cached_tokens"], ttft, reader.id, dict(params), counted, list(call.failures))

    def _count_missing(self, usage: dict[str, Any], reader: ReplyReader, messages: list[dict],
                       tools: list[dict] | None) -> str | None:
        """Fill in the token counts the server did not send, counted here; how (None: it sent both)."""
        if usage["prompt_tokens"] is not None and usage["completion_tokens"] is not None:
            return None
        counted, encoder = encoding_for(self.model)
        if usage["prompt_tokens"] is None:
            usage["prompt_tokens"] = count_prompt(messages, tools, encoder)
        if usage["completion_tokens"] is None:
            text, reasoning = reader.parts()
            usage["completion_tokens"] = count_reply(text, reasoning, reader.tool_calls(), encoder)
        return counted

    def _priced(self, model: str, prompt: int, completion: int) -> float | None:
        cost = self.prices.cost(self.model, prompt, completion)
        if cost is None and model != self.model:
            cost = self.prices.cost(model, prompt, completion)
        return cost

    def _wait(self, delay: float, cancel: threading.Event | None) -> None:
        if self._sleep is not None:
            self._sleep(delay)
        elif cancel is not None:
            cancel.wait(delay)
        else:
            time.sleep(delay)

    @staticmethod
    def _why(exc: Exception | None) -> str:
        import openai

        if isinstance(exc, openai.RateLimitError):
            return "rate-limited (429)"
        if isinstance(exc, (openai.APITimeoutError, AttemptTimedOut)):
            return "no answer in time"
        if isinstance(exc, openai.APIConnectionError):
            return "cannot reach the server"
        if isinstance(exc, MalformedReply):
            return f"unusable reply ({exc})"
        if isinstance(exc, FailedReply):
            return f"the reply failed ({exc})"
        status = getattr(exc, "status_code", None)
        return f"server error ({status})" if status else "failed"

    def _call(self, client: Any, messages: list[dict], params: dict[str, Any], streaming: bool,
              cancel: threading.Event | None, reader: ReplyReader) -> None:
        """One attempt, on a helper thread: ``--timeout`` bounds it in wall time (whatever the
        server sends to keep the connection open) and a cancel returns at once."""
        bounded(lambda handle: self._request(client, messages, params, streaming, reader, handle), cancel,
                self.timeout)

    def _request(self, client: Any, messages: list[dict], params: dict[str, Any], streaming: bool,
                 reader: ReplyReader, handle: dict[str, Any]) -> None:
        kwargs = dict(model=self.model, messages=messages, **params)
        if self.options.extra_body:
            kwargs["extra_body"] = dict(self.options.extra_body)
        if not streaming:
            with client.chat.completions.with_streaming_response.create(**kwargs) as response:
                handle["response"] = response
                read_body(response.read(), reader)
            return
        raw = client.chat.completions.with_raw_response.create(**kwargs, stream=True,
                                                               stream_options={"include_usage": True})
        content_type = str(raw.headers.get("content-type", ""))
        if "event-stream" in content_type:
            self.streams_ok = True
            read_stream(raw.parse(), reader, handle)
            return
        self.streams_ok = False     # the server answered in one piece
        handle["response"] = raw.http_response
        read_body(raw.http_response.read(), reader)

    def _gave_up(self, exc: Exception | None) -> AgentError:
        import openai

        tries = self.retries + 1
        if isinstance(exc, (openai.APITimeoutError, AttemptTimedOut)):
            return AgentError(f"the model server at {self.endpoint} did not answer within {self.timeout:g} s "
                              f"({tries} tries); is it overloaded? (raise --timeout)")
        if isinstance(exc, openai.APIConnectionError):
            return AgentError(f"cannot reach the model server at {self.endpoint} ({tries} tries: {exc}); "
                              "is it running, and is --base-url right?")
        if isinstance(exc, openai.RateLimitError):
            return AgentError(f"the model server at {self.endpoint} kept rate-limiting ({tries} tries, "
                              "429); lower -j or try later")
        if isinstance(exc, (MalformedReply, FailedReply)):
            return AgentError(f"the model server at {self.endpoint} sent no usable reply {tries} times ({exc})",
                              fatal=False)
        status = getattr(exc, "status_code", "")
        return AgentError(f"the model server at {self.endpoint} kept failing ({tries} tries, {status}: "
                          f"{error_message(exc)[:200] if exc else 'stopped'})")


@dataclass
class _CallState:
    """One ``complete`` call across its attempts: when it started, what failed, what cut attempts cost."""

    started: float
    extra: dict[str, Any]
    tools: list[dict] | None
    attempt_started: float = 0.0
    last: Exception | None = None
    failures: list[str] = field(default_factory=list)
    spent: dict[str, Any] = field(default_factory=dict)

    def fail(self, exc: Exception, why: str) -> None:
        self.last = exc
        self.failures.append(why)

    def spend(self, usage: dict[str, Any]) -> None:
        counted = usage.get("counted") or self.spent.get("counted")
        self.spent = {**add_usage(self.spent, usage), "counted": counted}


def with_budget(params: dict[str, Any], budget: int | None) -> dict[str, Any]:
    """``params`` with the reply's token budget (under whichever name it is sent) set to ``budget``."""
    if budget is None:
        return params
    out = dict(params)
    for name in BUDGET_PARAMS:
        if name in out:
            out[name] = budget
    return out


TRUNCATED_HINT = "the reply was cut at the token limit (finish_reason length); raise --max-tokens"


def preload_client(model: "ChatModel | None" = None, then: Callable[[], Any] | None = None) -> None:
    """Import the openai package on a helper thread (it takes a second or more: its types are
    hundreds of pydantic models), so that it loads while a run loads its tasks and starts
    its sandboxes, not ahead of them; the first call waits for it if it is not done. With
    ``model``, its client is made there too (an SSL context, an HTTP client and the chat
    resource: 0.1 s and more), so the first request does not make it; then ``then`` runs
    there (what the env's first score loads), while that request is out."""
    def load() -> None:
        try:
            import openai  # noqa: F401

            if model is not None:
                _ = model.client().chat.completions     # the resource's modules load at its first use
        except Exception:          # a broken install, whatever it raises: the first call says what is wrong
            pass
        if then is not None:
            try:
                then()
            except Exception:      # the score that needs it says what is wrong
                pass

    threading.Thread(target=load, name="icplay-import-openai", daemon=True).start()


def _listeners(notify: Callable[[str, dict], None] | None) -> tuple[Any, Any, Any]:
    """``ChatModel.complete``'s on_delta, on_retry and on_reasoning, each a ``notify`` call (or
    None when nobody listens)."""
    if notify is None:
        return None, None, None
    return ((lambda text: notify("delta", {"text": text})),
            (lambda attempt, delay, why: notify("retry", {"attempt": attempt, "delay": delay, "message": why,
                                                          "until": time.time() + delay})),
            (lambda text: notify("reasoning", {"text": text})))


def _reply_extras(done: Completion) -> dict[str, Any]:
    """What a reply carries besides its text, only when present: the model's thinking, its
    tool calls, and that it was cut at the token limit."""
    extras: dict[str, Any] = {}
    if done.reasoning:
        extras["reasoning"] = done.reasoning
    if done.tool_calls:
        extras["tool_calls"] = done.tool_calls
    if done.truncated:
        extras["reply_truncated"] = True
    return extras


def invalid_note(done: Completion, language: str, strategy: str) -> tuple[str, str]:
    """(why, message to the model) for a whole reply that held no command: only thinking, or
    no command (a cut one is ``cuts.cut_proposal``'s)."""
    if not done.text.strip() and done.reasoning:
        return "reasoning_only", ("[icplay] Your last reply held only reasoning and no answer, so nothing was run. "
                                  + retry_message(language, strategy).split(". ", 1)[1])
    return "no_command", retry_message(language, strategy)


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
                "max_tokens": self.model.max_tokens, "actions": self.actions, **self.model.describe()}

    def _complete(self, build: Callable[[ContextLimits], list[dict]], cancel, on_delta, on_retry,
                  on_reasoning, tools: list[dict] | None = None,
                  budget: int | None = None) -> tuple[list[dict], Completion]:
        """Build the chat and ask; a prompt too long for the model's context is trimmed and
        asked again (twice at most), else the error says which ``--context`` would fit."""
        limits = self.context
        messages = build(limits)
        for _ in range(3):
            try:
                return messages, self.model.complete(messages, cancel, on_delta, on_retry, on_reasoning=on_reasoning,
                                                     tools=tools, budget=budget)
            except ContextTooLong as exc:
                if budget is not None:     # a budget raised after a cut: first the usual one again
                    budget = None
                    continue
                if exc.limit and self.model.max_tokens >= exc.limit:
                    raise AgentError(f"{exc}: the reply's budget ({self.model.max_tokens:,} tokens) leaves no room for "
                                     f"a prompt in the model's {exc.limit:,}; lower --max-tokens", fatal=False) from None

                estimate = estimate_tokens(messages)
                if exc.limit and exc.requested:
                    target = int(estimate * (exc.limit - self.model.max_tokens) / exc.requested * 0.9)
                else:
                    target = int(min(estimate, limits.max_tokens) * 0.6)
                target = max(256, target)
                trimmed = build(ContextLimits(**{**limits.__dict__, "max_tokens": target}))
                if len(trimmed) >= len(messages) and estimate_tokens(trimmed) >= estimate:
                    raise AgentError(f"{exc} and trimming the history does not make it fit; try --context {target}"
                                     + ("" if not exc.limit else f" (the model takes {exc.limit:,} tokens in all, "
                                        f"--max-tokens included)"), fatal=False) from None
                limits = ContextLimits(**{**limits.__dict__, "max_tokens": target})
                messages = trimmed
        raise AgentError(f"the prompt still does not fit model {self.model.model!r}'s context after trimming; "
                         f"try --context {limits.max_tokens}", fatal=False)

    def propose(self, task: Task, trajectory: Trajectory, cancel: threading.Event | None = None,
                notify: Callable[[str, dict], None] | None = None) -> Proposal:
        """The next action; ``notify("delta", {"text"})`` streams the reply, ``notify("reasoning",
        {"text"})`` the model's thinking, ``notify("retry", {"attempt", "delay", "message"})``
        announces a wait; ``Cancelled`` when ``cancel`` is set."""
        on_delta, on_retry, on_reasoning = _listeners(notify)
        tools = self.actions == TOOLS
        if tools and (waiting := pending_call(trajectory, task.env)) is not None:
            return waiting         # the next call of the last reply: no model call
        usage: dict[str, Any] = {}
        info: dict[str, Any] = {}
        plan = None
        if self.strategy == "plan":
            plan = find_plan(trajectory)
            if plan is None:
                _, done = self._complete(lambda limits: plan_request_messages(task, trajectory, self.max_plan_steps,
                                                                               self.demos),
                                         cancel, on_delta, on_retry, on_reasoning)
                usage = add_usage(usage, done.usage())
                plan = parse_plan(done.text, self.max_plan_steps)
                info["plan"] = plan
                info["plan_raw"] = done.text
        try:
            messages, done = self._complete(
                lambda limits: build_messages(task, trajectory, self.strategy, self.protocol, limits, plan=plan,
                                              demos=self.demos, actions=self.actions),
                cancel, on_delta, on_retry, on_reasoning, tool_schemas(task.env) if tools else None,
                budget=budget_after_cut(trajectory))
        except Cancelled as exc:       # the plan's call (when there was one) cost its tokens too
            raise Cancelled(usage=add_usage(usage, exc.usage) if usage else exc.usage) from None
        usage = add_usage(usage, done.usage())
        info.update({"raw": done.text, "model": done.model, "finish_reason": done.finish_reason, "usage": usage,
                     "request": request_record(trajectory, messages, done.params), "response": done.response(),
                     **_reply_extras(done)})
        learnt = self.model.learnt()
        if learnt:
            trajectory.policy["learnt"] = learnt
            trajectory.policy["params"] = self.model.params()
        cut = cut_of(done, trajectory, self.actions, self.model.family, self.model.options.max_tokens)
        if cut is not None:            # never half an action: told back, asked again or the episode ends
            return cut_proposal(done, cut, info, task.env, self.strategy, self.actions)
        if tools:
            return reply_proposal(done, task.env, trajectory, info)
        return self._text_proposal(done, task.env, info)

    def _text_proposal(self, done: Completion, language: str, info: dict[str, Any]) -> Proposal:
        """The action a text reply names (its fenced block, or submit), or an invalid proposal
        whose note says why and what to send instead."""
        parsed = parse_reply(done.text, language)
        if not parsed.ok:
            why, message = invalid_note(done, language, self.strategy)
            info["invalid"] = True
            info["invalid_reason"] = why
            info["retry_message"] = message
            return Proposal("", parsed.thought, done.text, info)
        info["parsed_from"] = parsed.how
        if parsed.is_submit:
            action = "submit" + (f" {parsed.submit_arg}" if parsed.submit_arg else "")
            return Proposal(action if parsed.submit_arg else None, parsed.thought, done.text, info)
        return Proposal(parsed.action, parsed.thought, done.text, info)


__all__ = ["AgentError", "ChatModel", "Completion", "ContextTooLong", "sent_messages", "TRUNCATED_HINT", "LLMPolicy", "add_usage", "counted_turns"]
