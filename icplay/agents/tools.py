"""The tools protocol (``--actions tools``): an environment's actions offered as typed tools.

The text protocol (the default, InterCode's) asks for one fenced block per reply. Under
the tools protocol the request carries OpenAI ``tools`` instead, built from the
language's spec (``icplay.languages``): one tool that runs one action in the language
(``bash(command)``, ``sql(query)``, ``python(code)``; CTF's shell is ``bash``) and
``submit`` (with ``function_name`` for Python, ``flag`` for CTF). The model acts through
``tool_calls``; each call is one turn, and what came of it goes back as a ``tool``
message answering that call:

- a call that ran: its output (exit code, and the reward under ``intercode``);
- a call a human edited: "A human reviewer replaced your command with ..." and the output;
- a call a human rejected: the reviewer's comment (the rest of that reply is not run);
- a call that cannot be run (unknown tool, arguments that are not the tool's): what was
  wrong and how to call it; it uses up a turn, like an unparsable text reply;
- a call never reached (an earlier one of the same reply was rejected or malformed, the
  human took the turn): "not run", so that every call is answered.

Several calls in one reply run in order, one turn each: the policy proposes the next
waiting call of the last reply (no model call) until the reply is used up. A reply
without a tool call is unparsable (the model is told to call a tool); its text is never
run. Turns record the call they carry (``info["tool_call"]``: id, name, arguments) and the
first turn of a reply all its calls (``info["tool_calls"]``), so the chat is rebuilt
from the trajectory alone, as for the text protocol.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from icplay.agents.context import ContextLimits, Exchange, cut_middle, stub_of
from icplay.agents.parsing import language_prompts
from icplay.agents.strategies import _output, edit_note
from icplay.agents.strategies import turn_exchange
from icplay.episode import AGENT_EDITED, HUMAN, Proposal, Trajectory, Turn
from icplay.tasks.model import Task

TEXT, TOOLS = "text", "tools"
ACTIONS = (TEXT, TOOLS)
SUBMIT_TOOL = "submit"


def action_protocol(name: str | None) -> str:
    """``name`` checked (None: text): one of ``ACTIONS``, else a ValueError naming them."""
    key = (name or TEXT).strip().lower()
    if key not in ACTIONS:
        raise ValueError(f"unknown --actions {name!r} (text or tools)")
    return key


@dataclass(frozen=True)
class ToolSet:
    """The tools of one language: the one that runs an action, and submit."""

    language: str
    run: str                    # the run tool's name
    arg: str                    # its parameter
    submit_arg: str | None      # submit's parameter, when submit takes one

    def schemas(self) -> list[dict[str, Any]]:
        """The ``tools`` of a chat request (OpenAI function tools, JSON-schema parameters)."""
        words = language_prompts(self.language)
        run = {"type": "function", "function": {
            "name": self.run,
            "description": f"Run one {words.name} {words.unit} in the {words.setting}, and return its output.",
            "parameters": {"type": "object",
                           "properties": {self.arg: {"type": "string",
                                                     "description": f"The {words.name} {words.unit} to run."}},
                           "required": [self.arg], "additionalProperties": False}}}
        properties: dict[str, Any] = {}
        if self.submit_arg:
            properties[self.submit_arg] = {"type": "string", "description": words.submit_arg_help}
        submit = {"type": "function", "function": {
            "name": SUBMIT_TOOL,
            "description": "End the episode and have the work scored. Call it only when the task is done.",
            "parameters": {"type": "object", "properties": properties, "required": list(properties),
                           "additionalProperties": False}}}
        return [run, submit]

    def usage(self) -> str:
        """How to call the tools, in one sentence (said back after a bad call)."""
        submit = f"`{SUBMIT_TOOL}` with {{\"{self.submit_arg}\": \"...\"}}" if self.submit_arg else f"`{SUBMIT_TOOL}`"
        return f"call `{self.run}` with {{\"{self.arg}\": \"...\"}} to run one, or {submit} when you are done"

    def action_of(self, call: dict[str, Any]) -> tuple[str | None, str | None]:
        """(action, None) for a call that can run — the action ``None`` or ``"submit ARG"``
        for submit — else (None, what is wrong with it)."""
        name = str(call.get("name") or "")
        args, problem = _arguments(call.get("arguments"))
        if name == SUBMIT_TOOL:
            if problem:
                return None, f"the arguments of `{SUBMIT_TOOL}` are not a JSON object ({problem})"
            return self._submit_action(args), None
        if name != self.run:
            return None, f"there is no tool `{name}`"
        if problem:
            return None, f"the arguments of `{self.run}` are not a JSON object ({problem})"
        code = args.get(self.arg)
        if code is None and len(args) == 1:      # the one argument under another name ("cmd")
            code = next(iter(args.values()))
        if not isinstance(code, str):
            return None, f"`{self.run}` needs the argument \"{self.arg}\" (a string)"
        if not code.strip():
            return None, f"the \"{self.arg}\" of `{self.run}` is empty"
        return code, None


    def _submit_action(self, args: dict[str, Any]) -> str:
        """``submit ARG`` (the one argument under another name too), or ``submit``."""
        value = args.get(self.submit_arg) if self.submit_arg else None
        if value is None and self.submit_arg and len(args) == 1:
            value = next(iter(args.values()))
        value = str(value).strip() if value is not None else ""
        return f"submit {value}" if value else "submit"


def _arguments(raw: Any) -> tuple[dict[str, Any], str | None]:
    if isinstance(raw, dict):
        return raw, None
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}, None
    try:
        value = json.loads(raw)
    except (TypeError, ValueError) as exc:
        return {}, str(exc)
    if not isinstance(value, dict):
        return {}, f"got {type(value).__name__}"
    return value, None


def toolset(language: str) -> ToolSet:
    words = language_prompts(language)
    return ToolSet(language, words.run_tool, words.run_arg, words.submit_arg_name if words.submit_arg else None)


def tool_schemas(language: str) -> list[dict[str, Any]]:
    return toolset(language).schemas()


# --- from a reply to proposals -------------------------------------------------------------


def normalize_calls(calls: list[Any] | None, prefix: str) -> list[dict[str, Any]]:
    """A reply's tool calls as ``{"id", "name", "arguments"}`` (arguments a JSON string), each
    with an id unique in the episode (a server that sends none or repeats one gets ``prefix_k``)."""
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for k, call in enumerate(calls or []):
        if not isinstance(call, dict):
            call = {"id": getattr(call, "id", None), "name": getattr(call, "name", None),
                    "arguments": getattr(call, "arguments", None)}
        args = call.get("arguments")
        if not isinstance(args, str):
            args = json.dumps(args if args is not None else {}, ensure_ascii=False)
        ident = str(call.get("id") or "")
        if not ident or ident in seen:
            ident = f"{prefix}_{k}"
        seen.add(ident)
        out.append({"id": ident, "name": str(call.get("name") or ""), "arguments": args})
    return out


def no_call_message(language: str) -> str:
    """What the model is told when its reply called no tool (nothing was run)."""
    return (f"[icplay] Your last reply called no tool, so nothing was run. Act through the tools: "
            f"{toolset(language).usage()}.")


def bad_call_message(language: str, problem: str) -> str:
    return f"[icplay] This call was not run: {problem}. Instead, {toolset(language).usage()}."


def no_call_note(done: Any, language: str) -> tuple[str, str]:
    """(why, message to the model) for a whole reply that called no tool: only thinking, or no
    call (a cut one is ``cuts.cut_proposal``'s)."""
    tail = f"Act through the tools: {toolset(language).usage()}."
    if not (done.text or "").strip() and getattr(done, "reasoning", None):
        return "reasoning_only", ("[icplay] Your last reply held only reasoning and no tool call, so nothing was "
                                  f"run. {tail}")
    return "no_call", no_call_message(language)


def reply_proposal(done: Any, language: str, trajectory: Trajectory, info: dict[str, Any]) -> Proposal:
    """The proposal for a model's reply (a ``Completion``: ``text``, ``tool_calls``): its first
    tool call (the rest wait, ``pending_call``), or an unparsable proposal when it called none."""
    text = done.text or ""
    calls = normalize_calls(done.tool_calls, f"call_{len(trajectory.turns)}")
    info = {**info, "actions": TOOLS}
    thought = text.strip() or None
    if not calls:
        why, message = no_call_note(done, language)
        info.update(invalid=True, invalid_reason=why, retry_message=message)
        info.pop("tool_calls", None)
        return Proposal("", thought, text, info)
    info["tool_calls"] = calls
    return call_proposal(calls[0], language, info, thought, text)


def call_proposal(call: dict[str, Any], language: str, info: dict[str, Any], thought: str | None = None,
                  raw: str | None = None) -> Proposal:
    info = {**info, "tool_call": call}
    action, problem = toolset(language).action_of(call)
    if problem is not None:
        info.update(invalid=True, retry_message=bad_call_message(language, problem))
        return Proposal("", thought, raw, info)
    if action is not None and action.strip() == "submit":
        return Proposal(None, thought, raw, info)
    return Proposal(action, thought, raw, info)


def _closes_reply(turn: Turn) -> bool:
    """A turn after which the rest of its reply is not run (so the model hears about it first)."""
    return bool(turn.info.get("rejected") or turn.info.get("invalid"))


def pending_call(trajectory: Trajectory, language: str) -> Proposal | None:
    """The next call of the last reply still waiting to run, as a proposal; None when the
    model must be asked. A reply stops being worked once a call of it was rejected or
    could not run, or a turn that is not one of its calls came after it."""
    turns = trajectory.turns
    start = next((i for i in range(len(turns) - 1, -1, -1) if "tool_calls" in (turns[i].info or {})), None)
    if start is None:
        return None
    calls = turns[start].info["tool_calls"]
    done = turns[start:]
    if len(done) >= len(calls):
        return None
    for call, turn in zip(calls, done):
        if (turn.info.get("tool_call") or {}).get("id") != call.get("id") or _closes_reply(turn):
            return None
    k = len(done)
    return call_proposal(calls[k], language, {"actions": TOOLS, "batch": [k + 1, len(calls)]})


# --- from a trajectory back to messages ----------------------------------------------------

NOT_RUN_REPLY = "[icplay] Not run: an earlier call of the same reply was not run, so the rest were skipped."
NOT_RUN_HUMAN = "[icplay] Not run: the human at the keyboard took the turn instead."


def wire_call(call: dict[str, Any]) -> dict[str, Any]:
    """A recorded call as the API's ``tool_calls`` item."""
    return {"id": call["id"], "type": "function",
            "function": {"name": call.get("name") or "", "arguments": call.get("arguments") or "{}"}}


@dataclass
class ToolResult:
    """What one call's ``tool`` message says: ``prefix`` + observation + ``suffix``."""

    prefix: str
    observation: str = ""
    suffix: str = ""

    def text(self) -> str:
        return self.prefix + self.observation + self.suffix


@dataclass
class ToolExchange(Exchange):
    """One reply with tool calls, and a ``tool`` message answering each call."""

    calls: list[dict[str, Any]] = field(default_factory=list)
    results: list[ToolResult] = field(default_factory=list)
    note: str | None = None      # a user message after the results (a plan step's instruction)

    def messages(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = [{"role": "assistant", "content": self.assistant or None,
                                      "tool_calls": [wire_call(c) for c in self.calls]}]
        for call, result in zip(self.calls, self.results):
            out.append({"role": "tool", "tool_call_id": call["id"], "content": result.text()})
        if self.note:
            out.append({"role": "user", "content": self.note})
        return out

    def fill(self, why: str) -> None:
        """Answer every call that has no result yet with ``why``."""
        while len(self.results) < len(self.calls):
            self.results.append(ToolResult(why))

    def with_note(self, note: str) -> "ToolExchange":
        return ToolExchange(self.assistant, "", calls=self.calls, results=self.results,
                            note=f"{self.note}\n\n{note}" if self.note else note)

    def stubbable(self) -> bool:
        return any(len(r.observation) > 80 for r in self.results)

    def stubbed(self) -> "ToolExchange":
        results = [ToolResult(r.prefix, stub_of(r.observation), r.suffix) if len(r.observation) > 80 else r
                   for r in self.results]
        return ToolExchange(self.assistant, "", calls=self.calls, results=results, note=self.note)


def tool_result(turn: Turn, language: str, limits: ContextLimits) -> ToolResult:
    """What the model is told about the call ``turn`` carries."""
    if turn.info.get("rejected"):
        comment = turn.comment or "no reason given"
        return ToolResult(f"A human reviewer rejected this call without running it. Their comment: {comment}")
    if turn.info.get("invalid"):
        suffix = f"\nReward: {turn.reward:g}" if turn.reward is not None else ""
        return ToolResult(turn.observation or "", "", suffix)
    prefix, obs, suffix = _output(turn)
    obs = cut_middle(obs, limits.max_observation_chars)
    if turn.author == AGENT_EDITED:
        return ToolResult(edit_note(turn, language) + prefix, obs, suffix)
    return ToolResult("", obs, suffix)


def _answers_next_call(reply: ToolExchange | None, call: dict[str, Any]) -> bool:
    """Is ``call`` the next call of the open reply that has no result yet?"""
    return reply is not None and len(reply.results) < len(reply.calls) and \
        reply.calls[len(reply.results)].get("id") == call.get("id")


def tool_exchanges(trajectory: Trajectory, task: Task, strategy: str, limits: ContextLimits) -> list[Exchange]:
    """The trajectory as tools-protocol exchanges: a reply's calls and their results; turns that
    carry no call (a human's, a reply without a call, a text-protocol turn) as in the text protocol."""
    out: list[Exchange] = []
    reply: ToolExchange | None = None
    for turn in trajectory.turns:
        info = turn.info or {}
        call = info.get("tool_call")
        if call is None:
            if reply is not None:
                reply.fill(NOT_RUN_HUMAN if turn.author == HUMAN else NOT_RUN_REPLY)
                reply = None
            ex = turn_exchange(turn, task.env, strategy, limits)
            if ex is not None:
                out.append(ex)
            continue
        if "tool_calls" in info or not _answers_next_call(reply, call):
            if reply is not None:
                reply.fill(NOT_RUN_REPLY)
            reply = ToolExchange(info.get("raw") or None, "", calls=list(info.get("tool_calls") or [call]))
            out.append(reply)
        assert reply is not None, "a call answers the open reply or opens one"
        reply.results.append(tool_result(turn, task.env, limits))
        if _closes_reply(turn):
            reply.fill(NOT_RUN_REPLY)
    if reply is not None:
        reply.fill(NOT_RUN_REPLY)
    return out


__all__ = ["ACTIONS", "TEXT", "TOOLS", "SUBMIT_TOOL", "ToolSet", "ToolExchange", "action_protocol", "toolset",
           "tool_schemas", "reply_proposal", "pending_call", "tool_exchanges", "wire_call", "no_call_message"]
