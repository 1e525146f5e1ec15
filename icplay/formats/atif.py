"""Trajectories as ATIF (the Agent Trajectory Interchange Format, Harbor's; the ``atif``
package has its pydantic models): one ATIF document per episode.

The mapping:

- step 1, ``user``: the task's query (what the solver was asked);
- an agent turn (``agent``, or ``agent-edited-by-human``): an ``agent`` step whose one
  tool call is ``run`` with the executed action as ``code``, its observation the action's
  output (icplay's notes in the result's ``extra``), the model's thought as
  ``reasoning_content`` and the call's token usage and cost as ``metrics``. A human's
  edit keeps the agent's proposal and the human's comment in the step's ``extra``
  (``author``, ``proposed``, ``comment``);
- a human turn: the acting party's step like an agent turn (``source`` agent: ATIF gives
  tool calls to that role only) with the command as its ``run`` call and its output as the
  observation, ``llm_call_count`` 0 (no model was called) and ``extra.author`` ``human``
  (with the annotator), so human demonstrations are agent data a trainer can use;
- a turn a human labelled (good / bad / neutral) carries the label in its step's ``extra``;
- a rejected proposal: an ``agent`` step with the proposal as its message and no tool
  call, ``extra`` saying who rejected it and why;
- the submit: a ``system`` step whose observation is the reward, the breakdown and the
  strict verdict in ``extra``.

``final_metrics`` sums the tokens and cost the policy recorded; ``extra`` at the root keeps
icplay's task key, env, sandbox, status and rewards.
"""

from __future__ import annotations

import datetime as _dt
import json
from typing import Any

from icplay.envs.base import observation_parts
from icplay.episode import KIND_HUMAN, KIND_INVALID, KIND_REJECTED, Trajectory, Turn

SCHEMA_VERSION = "ATIF-v1.6"
AGENT_NAME = "icplay"
AGENT_VERSION = "0.1.0"


def _time(epoch: float | None) -> str | None:
    if not epoch:
        return None
    return _dt.datetime.fromtimestamp(epoch, _dt.timezone.utc).isoformat().replace("+00:00", "Z")


def _metrics(usage: dict[str, Any] | None) -> dict[str, Any] | None:
    usage = usage or {}
    metrics = {"prompt_tokens": usage.get("prompt_tokens"), "completion_tokens": usage.get("completion_tokens"),
               "cost_usd": usage.get("cost")}
    metrics = {k: v for k, v in metrics.items() if v is not None}
    return metrics or None


def _agent_step(step_id: int, turn: Turn, model: str | None) -> dict[str, Any]:
    call_id = f"call_{turn.index}"
    text, notes = _observation(turn)
    extra: dict[str, Any] = {"author": turn.author, "exit_code": turn.exit_code, "duration": turn.duration}
    if turn.proposed is not None and turn.proposed != turn.action:
        extra["proposed"] = turn.proposed
    if turn.comment:
        extra["comment"] = turn.comment
    if turn.reward is not None:
        extra["reward"] = turn.reward
    step: dict[str, Any] = {
        "step_id": step_id, "timestamp": _time(turn.started_at), "source": "agent",
        "message": turn.thought or "",
        "tool_calls": [{"tool_call_id": call_id, "function_name": "run", "arguments": {"code": turn.action}}],
        "observation": {"results": [{"source_call_id": call_id, "content": text,
                                     **({"extra": {"notes": notes}} if notes else {})}]},
        "extra": extra,
    }
    if turn.thought:
        step["reasoning_content"] = turn.thought
    model_name = turn.info.get("model")
    if model_name and model_name != model:
        step["model_name"] = model_name
    metrics = _metrics(turn.info.get("usage"))
    if metrics:
        step["metrics"] = metrics
    return step


def _observation(turn: Turn) -> tuple[str, list[str]]:
    return observation_parts(turn.observation, turn.info)


def _human_step(step_id: int, turn: Turn) -> dict[str, Any]:
    """A human's action as the acting party's step, in ATIF's own fields: ``source`` agent (ATIF
    gives actions, ``tool_calls``, to that role only), the action as the ``run`` call, its
    output as the observation; ``llm_call_count`` 0 says no model was called (ATIF's mark of a
    non-LLM step) and ``extra.author`` says a human acted."""
    call_id = f"call_{turn.index}"
    text, notes = _observation(turn)
    extra: dict[str, Any] = {"author": turn.author, "exit_code": turn.exit_code, "duration": turn.duration,
                             "annotator": turn.info.get("annotator")}
    if turn.comment:
        extra["comment"] = turn.comment
    if turn.reward is not None:
        extra["reward"] = turn.reward
    return {"step_id": step_id, "timestamp": _time(turn.started_at), "source": "agent", "message": "",
            "llm_call_count": 0,
            "tool_calls": [{"tool_call_id": call_id, "function_name": "run", "arguments": {"code": turn.action}}],
            "observation": {"results": [{"source_call_id": call_id, "content": text,
                                         **({"extra": {"notes": notes}} if notes else {})}]},
            "extra": extra}


def _rejected_step(step_id: int, turn: Turn) -> dict[str, Any]:
    return {"step_id": step_id, "timestamp": _time(turn.started_at), "source": "agent",
            "message": turn.proposed or "", "extra": {"author": turn.author, "rejected": True,
                                                      "comment": turn.comment, "kind": turn.kind}}


def _turn_step(step_id: int, turn: Turn, model: str | None) -> dict[str, Any]:
    """The step of one turn, by its kind (a human's label, if any, in its ``extra``)."""
    step = _kind_step(step_id, turn, model)
    if turn.label:
        step["extra"] = {**step.get("extra", {}), "label": turn.label}
    return step


def _kind_step(step_id: int, turn: Turn, model: str | None) -> dict[str, Any]:
    if turn.kind == KIND_REJECTED:
        return _rejected_step(step_id, turn)
    if turn.kind == KIND_INVALID:   # a reply with no action in it: the model's text, no call
        return {"step_id": step_id, "timestamp": _time(turn.started_at), "source": "agent",
                "message": turn.info.get("raw") or "", "extra": {"invalid": True, "author": turn.author,
                                                                "observation": turn.observation}}
    if turn.kind == KIND_HUMAN:
        return _human_step(step_id, turn)
    return _agent_step(step_id, turn, model)


def _submit_step(step_id: int, traj: Trajectory) -> dict[str, Any]:
    """The system's step for the submit: its reward, breakdown and strict verdict."""
    result = f"submitted: reward {traj.reward}" if traj.reward is not None else "submitted"
    extra = {"reward": traj.reward, "breakdown": traj.breakdown}
    if traj.strict is not None:
        extra["strict"] = traj.strict
    return {"step_id": step_id, "timestamp": _time(traj.updated_at), "source": "system",
            "message": "submit", "observation": {"results": [{"content": result}]}, "extra": extra}


def atif_document(traj: Trajectory) -> dict[str, Any]:
    """One episode as an ATIF trajectory (a JSON-ready dict)."""
    model = traj.policy.get("model")
    task_query = str(traj.task.get("query") or "")
    steps: list[dict[str, Any]] = [{"step_id": 1, "timestamp": _time(traj.started_at), "source": "user",
                                    "message": task_query}]
    for turn in traj.turns:
        steps.append(_turn_step(len(steps) + 1, turn, model))
    if traj.status == "submitted":
        steps.append(_submit_step(len(steps) + 1, traj))
    usage = traj.usage
    final = {"total_prompt_tokens": usage.get("prompt_tokens"), "total_completion_tokens": usage.get("completion_tokens"),
             "total_cost_usd": usage.get("cost"), "total_steps": len(steps)}
    agent: dict[str, Any] = {"name": AGENT_NAME, "version": AGENT_VERSION,
                             "extra": {"policy": {k: v for k, v in traj.policy.items() if k != "usage"},
                                       "annotator": traj.annotator}}
    if model:
        agent["model_name"] = str(model)
    return {
        "schema_version": SCHEMA_VERSION, "session_id": traj.id, "agent": agent, "steps": steps,
        "final_metrics": {k: v for k, v in final.items() if v is not None},
        "extra": {"task": f"{traj.task.get('set')}/{traj.task.get('id')}",
                  "env": traj.env, "sandbox": traj.sandbox, "status": traj.status, "reward": traj.reward,
                  "best_reward": traj.best_reward, "time_worked": traj.time_worked, "annotator": traj.annotator,
                  "attempt": traj.attempt, "gold_seen_at": traj.gold_seen_at,
                  **({"after_gold_seen": True} if traj.after_gold_seen else {}),
                  **({"forked_from": traj.forked_from} if traj.forked_from else {})},
    }


def _without_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_none(v) for v in value]
    return value


def atif_lines(trajs: list[Trajectory]) -> str:
    """JSON Lines: one ATIF document per episode."""
    return "".join(json.dumps(_without_none(atif_document(t)), ensure_ascii=False) + "\n" for t in trajs)
