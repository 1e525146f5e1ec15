"""What each model call sent and got back, as kept on the agent's turns (``turn.info``).

``request`` — the messages sent, without repeating the history turn after turn: the first
``keep`` messages of the call recorded on turn ``ref``, then ``added``; plus ``params``
(what the request carried besides the messages). ``response`` — the reply's id and model,
finish reason, usage (prompt, completion, reasoning, cached tokens; None where the server
said nothing), latency, time to first token, cost, attempts. Readers here rebuild the whole
chat of a turn and describe a call or the difference between two episodes' calls, for the
viewer's stepper and compare screens (plain data and text; no textual).
"""

from __future__ import annotations

from typing import Any

from icplay.episode import Trajectory, Turn


def request_record(trajectory: Trajectory, messages: list[dict], params: dict[str, Any]) -> dict[str, Any]:
    """The ``request`` record of a call about to be kept on the next turn of ``trajectory``."""
    previous: tuple[int, list[dict]] | None = None
    for turn in reversed(trajectory.turns):
        if isinstance(turn.info.get("request"), dict):
            previous = (turn.index, sent_messages(trajectory, turn.index))
            break
    keep = 0
    if previous is not None:
        for old, now in zip(previous[1], messages):
            if old != now:
                break
            keep += 1
    return {"ref": previous[0] if previous is not None and keep else None, "keep": keep,
            "added": [dict(m) for m in messages[keep:]], "params": dict(params)}


def sent_messages(trajectory: Trajectory, index: int) -> list[dict]:
    """The whole chat sent for turn ``index`` (rebuilt from the per-turn records)."""
    turns = {t.index: t for t in trajectory.turns}
    chain: list[dict] = []
    seen: set[int] = set()
    at: int | None = index
    while at is not None and at in turns and at not in seen:
        seen.add(at)
        record = turns[at].info.get("request")
        if not isinstance(record, dict):
            break
        chain.append(record)
        at = record.get("ref")
    messages: list[dict] = []
    for record in reversed(chain):
        messages = messages[:int(record.get("keep") or 0)] + list(record.get("added") or [])
    return messages


def _n(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else "unknown"


def call_lines(turn: Turn) -> list[tuple[str, str]]:
    """(label, text) rows describing the call that proposed ``turn``; [] when no call did."""
    response = turn.info.get("response")
    request = turn.info.get("request")
    if not isinstance(response, dict):
        return []
    rows: list[tuple[str, str]] = []
    model = str(response.get("model") or "?") + (f" · {response['id']}" if response.get("id") else "")
    rows.append(("model", model))
    if isinstance(request, dict):
        params = request.get("params") or {}
        rows.append(("sent", " · ".join(f"{k}={v}" for k, v in params.items()) or "no parameters"))
    finish = response.get("finish_reason") or "not given"
    if finish == "length":
        finish += " (truncated: raise --max-tokens)"
    rows.append(("finish", finish))
    rows += _tool_call_row(turn)
    rows.append(("tokens", _tokens_text(response)))
    latency = _latency_text(response)
    if latency is not None:
        rows.append(("latency", latency))
    cost = response.get("cost")
    rows.append(("cost", "unpriced" if cost is None else f"${cost:.5f}"))
    return rows


def _tool_call_row(turn: Turn) -> list[tuple[str, str]]:
    """The tool call a turn ran (tools mode): its name, its id, its place in the reply."""
    call = turn.info.get("tool_call")
    if not isinstance(call, dict):
        return []
    batch = turn.info.get("batch") or ([1, len(turn.info["tool_calls"])] if turn.info.get("tool_calls") else None)
    where = f" · {batch[0]} of {batch[1]} in the reply" if isinstance(batch, list) and len(batch) == 2 else ""
    return [("tool call", f"{call.get('name') or '?'} · id {call.get('id') or '?'}{where}")]


def _tokens_text(response: dict[str, Any]) -> str:
    """A call's tokens: prompt (cached) · completion (reasoning), or why they are unknown;
    marked when icplay counted them (the server reported none)."""
    counted = response.get("usage_counted")
    text = _server_tokens(response.get("usage") or {})
    return f"{text} (estimate, {counted}: the server reported no usage)" if counted else text


def _server_tokens(usage: dict[str, Any]) -> str:
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if prompt is None and completion is None:
        return "unknown (the server reported no usage)"
    text = f"prompt {_n(prompt)}"
    if usage.get("cached_tokens") is not None:
        text += f" (cached {_n(usage['cached_tokens'])})"
    text += f" · completion {_n(completion)}"
    if usage.get("reasoning_tokens") is not None:
        text += f" (reasoning {_n(usage['reasoning_tokens'])})"
    return text


def _latency_text(response: dict[str, Any]) -> str | None:
    """A call's latency, its first token and its attempts; None when not recorded."""
    latency = response.get("latency")
    if latency is None:
        return None
    text = f"{latency:.2f} s"
    if response.get("ttft") is not None:
        text += f" (first token after {response['ttft']:.2f} s)"
    if (response.get("attempts") or 1) > 1:
        text += f" · {response['attempts']} attempts"
    return text


def new_messages(turn: Turn) -> list[dict]:
    """The messages this turn's call added to the previous call's (the whole chat for the first)."""
    request = turn.info.get("request")
    return list(request.get("added") or []) if isinstance(request, dict) else []


def episode_calls(trajectory: Trajectory) -> dict[str, Any]:
    """Totals over an episode's recorded calls, for comparing two episodes."""
    out: dict[str, Any] = {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "reasoning_tokens": 0,
                           "latency": 0.0, "truncated": 0, "unknown_usage": 0}
    for turn in trajectory.turns:
        response = turn.info.get("response")
        if not isinstance(response, dict):
            continue
        out["calls"] += 1
        usage = response.get("usage") or {}
        if usage.get("completion_tokens") is None or response.get("usage_counted"):
            out["unknown_usage"] += 1       # the server said nothing (icplay's estimate, if any, is not its figure)
        for key in ("prompt_tokens", "completion_tokens", "reasoning_tokens"):
            out[key] += usage.get(key) or 0
        out["latency"] += response.get("latency") or 0.0
        out["truncated"] += int(response.get("finish_reason") == "length")
    out["cost"] = trajectory.cost
    return out


POLICY_KEYS = ("model", "base_url", "strategy", "protocol", "family", "params", "extra_body", "learnt")


def call_differences(left: Trajectory, right: Trajectory) -> list[tuple[str, str, str]]:
    """(what, left, right) for each way the two episodes' model calls differ: the policy's
    settings, the system prompt, and the calls' totals (tokens, latency, cost, truncation).
    [] unless a model worked both (a human's episode has no calls to compare)."""
    rows: list[tuple[str, str, str]] = []
    if left.policy.get("kind") != "llm" or right.policy.get("kind") != "llm":
        return rows
    for key in POLICY_KEYS:
        a, b = left.policy.get(key), right.policy.get(key)
        if a != b:
            rows.append((key, _show(a), _show(b)))
    return rows + _system_difference(left, right) + _total_differences(episode_calls(left), episode_calls(right))


def _system_difference(left: Trajectory, right: Trajectory) -> list[tuple[str, str, str]]:
    """A row when both episodes' first calls show a system prompt and the two differ."""
    first = [next((t for t in traj.turns if isinstance(t.info.get("request"), dict)), None) for traj in (left, right)]
    systems = [_system(traj, turn) for traj, turn in zip((left, right), first)]
    if None in systems or systems[0] == systems[1]:
        return []
    return [("system prompt", f"{len(systems[0] or '')} chars", f"{len(systems[1] or '')} chars (differs)")]


_CALL_TOTALS = (("calls", "calls"), ("prompt_tokens", "prompt tokens"), ("completion_tokens", "completion tokens"),
                ("reasoning_tokens", "reasoning tokens"), ("truncated", "truncated replies"),
                ("unknown_usage", "calls without usage"))


def _total_differences(a: dict[str, Any], b: dict[str, Any]) -> list[tuple[str, str, str]]:
    """The rows for the two episodes' call totals that differ ([] when neither made a call)."""
    if not a["calls"] and not b["calls"]:
        return []
    rows = [(label, f"{a[key]:,}", f"{b[key]:,}") for key, label in _CALL_TOTALS if a[key] != b[key]]
    if round(a["latency"], 1) != round(b["latency"], 1):
        rows.append(("model time", f"{a['latency']:.1f} s", f"{b['latency']:.1f} s"))
    if a["cost"] != b["cost"]:
        rows.append(("cost", _money(a["cost"]), _money(b["cost"])))
    return rows


def _system(traj: Trajectory, turn: Turn | None) -> str | None:
    if turn is None:
        return None
    messages = sent_messages(traj, turn.index)
    return next((str(m.get("content")) for m in messages if m.get("role") == "system"), "")


def _show(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, dict):
        return " ".join(f"{k}={v}" for k, v in value.items()) or "{}"
    if isinstance(value, list):
        return "; ".join(str(v) for v in value)
    return str(value)


def _money(value: float | None) -> str:
    return "unpriced" if value is None else f"${value:.4f}"
