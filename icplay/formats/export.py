"""Saved episodes out as training data: ``chat``, ``fewshot``, ``preference``,
``intercode`` and ``csv`` (docs/export.md shows each with an example).

Chat records keep what was done: every action the model would have had to write (``submit``
with its argument where the language's submit takes one), each assistant message weighted 1
(learn from it: agent turns that ran, human edits and actions) or 0 (context: rejected
proposals, followed by the reviewer's comment) in OpenAI's / axolotl's per-message
``weight`` convention, and ``metadata`` naming the task, episode, attempt, annotator, model,
outcome and each message's author. Preference pairs come from branches (``icplay branch``)
whose outcomes differ (see "preference pairs grounded in outcomes" below).

Every format is built from icplay trajectories (``icplay.formats.load_logs`` reads a run
folder, a session, a trajectory file or InterCode's files). ``select`` filters episodes
(solved as InterCode counts it or strictly, by author, by reward). Actions are written in the reply format of a
prompting strategy (``icplay.agents.strategies``): a fenced block, or Thought/Action for
``react``; observations as the ``Output:`` message the policy sends back. Under the tools
protocol (an episode played with ``--actions tools``, or ``--actions tools`` here) chat and
preference data are in OpenAI's tool-calling format instead: each action an assistant
message with one ``tool_calls`` item, its output a ``tool`` message, and the chat record
carries the ``tools`` offered (what SFT trainers such as TRL's take).

Who an episode is by (``episode_author``): ``human`` when no agent turn ran (human play),
``agent`` when no human stepped in (no edit, rejection or human turn), ``mixed`` otherwise.
"""

from __future__ import annotations

import csv
import io
import json
from itertools import combinations
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from icplay.agents import prompts
from icplay.agents.context import cut_middle
from icplay.agents.strategies import fenced
from icplay.agents.tools import SUBMIT_TOOL, TOOLS, action_protocol, tool_schemas, toolset, wire_call
from icplay.episode import (AGENT, AGENT_EDITED, HUMAN, KIND_AGENT, KIND_EDITED, KIND_HUMAN, KIND_INVALID, KIND_REJECTED,
                            Trajectory, Turn)
from icplay.json_shape import JsonFileError, read_json_text
from icplay.languages.registry import find as find_language
from icplay.tasks.model import Task
from icplay.tasks.registry import find_set

FORMATS = ("chat", "fewshot", "preference", "intercode", "csv")
AUTHORS = ("any", "human", "agent", "mixed")
# ``--solved KIND``: which verdict an episode must have passed. "strict" lets through only
# episodes judged strictly solved: one whose env gave no verdict is left out, never guessed.
SOLVED_BY = {
    "intercode": lambda t: t.solved,
    "strict": lambda t: t.strictly_solved is True,
}
ANY_OUTCOME = "any"     # ``--solved any``: solved or not
# Which episodes a format takes when ``--solved`` is not given: chat (SFT) data teaches what it
# shows, so only solved episodes go in; the others keep every outcome (preference and step data
# need the failures, and carry each outcome in their records).
DEFAULT_SOLVED = {"chat": "intercode", "fewshot": "intercode"}
FEWSHOT_FORMAT = "icplay-fewshot/1"
OBSERVATION_CHARS = 4000       # per observation in chat and preference data
DEMO_OBSERVATION_CHARS = 800   # per observation in a few-shot demonstration


class ExportError(ValueError):
    """Episodes that cannot be written in the asked format; the message says why."""


# --- choosing episodes ---------------------------------------------------------------------


def episode_author(traj: Trajectory) -> str:
    mix = traj.author_mix()
    if not (mix[KIND_AGENT] or mix[KIND_EDITED] or mix[KIND_INVALID] or mix[KIND_REJECTED]):
        return "human"
    if not (mix[KIND_EDITED] or mix[KIND_HUMAN] or mix[KIND_REJECTED]):
        return "agent"
    return "mixed"


def best_reward(traj: Trajectory) -> float | None:
    return traj.best_reward if traj.best_reward is not None else traj.reward


def select(trajs: Iterable[Trajectory], solved_only: bool = False, author: str = "any",
           min_reward: float | None = None, solved: str | None = None) -> list[Trajectory]:
    """The episodes that pass the filters (errored ones and ones with no turn never do).

    ``solved``: a key of ``SOLVED_BY`` (``solved_only`` is ``solved="intercode"``)."""
    if solved is not None and solved != ANY_OUTCOME and solved not in SOLVED_BY:
        raise ExportError(f"unknown solved verdict {solved!r} (one of: {', '.join(SOLVED_BY)}, {ANY_OUTCOME})")
    passes = SOLVED_BY[solved or "intercode"] if (solved or solved_only) and solved != ANY_OUTCOME else None
    def kept(t: Trajectory) -> bool:
        if t.status == "error" or not t.turns or (passes is not None and not passes(t)):
            return False
        if author != "any" and episode_author(t) != author:
            return False
        reward = best_reward(t)
        return min_reward is None or (reward is not None and not reward < min_reward)

    return [t for t in trajs if kept(t)]


# --- messages ------------------------------------------------------------------------------


def task_of(traj: Trajectory) -> Task:
    d = dict(traj.task)
    d.setdefault("env", traj.env)
    d.setdefault("gold", "")
    d.setdefault("query", "")
    d.setdefault("id", "?")
    return Task.from_dict(d)


def protocol_of(traj: Trajectory, protocol: str | None = None) -> str:
    return protocol or str(traj.policy.get("protocol") or "agent")


def reply(action: str, language: str, strategy: str, thought: str | None = None) -> str:
    """An action as the strategy asks the model to write it."""
    if strategy == "react":
        return f"Thought: {(thought or '').strip()}\nAction: {fenced(action, language)}"
    return fenced(action, language)


def assistant(content: str, turn: Turn | None = None, reasoning: bool = False) -> dict[str, str]:
    """An assistant message; with ``reasoning`` it keeps the model's thinking as
    ``reasoning_content`` (the field reasoning models' chat templates read; off by default)."""
    message = {"role": "assistant", "content": content}
    if reasoning and turn is not None and turn.reasoning:
        message["reasoning_content"] = turn.reasoning
    return message


def output_message(turn: Turn, limit: int = OBSERVATION_CHARS, prefix: str = "Output:\n") -> str:
    text = prefix + cut_middle(turn.observation or "", limit)
    if turn.exit_code not in (None, 0):
        text += f"\n(exit code {turn.exit_code})"
    if turn.reward is not None:
        text += f"\nReward: {turn.reward:g}"
    return text


def executed(traj: Trajectory) -> list[Turn]:
    """Turns whose action ran (rejected proposals and unparsable replies left out)."""
    return [t for t in traj.turns if t.action and not t.info.get("invalid") and not t.info.get("rejected")]


def actions_of(traj: Trajectory, actions: str | None = None) -> str:
    """The action protocol to write ``traj`` in: ``actions``, else the episode's own (text)."""
    try:
        return action_protocol(actions or traj.policy.get("actions"))
    except ValueError:
        raise ExportError(f"episode {traj.id}: its policy's actions {traj.policy.get('actions')!r} are neither "
                          "text nor tools") from None


class Replies:
    """How actions and outputs are written as messages: the text protocol's (a fenced block
    and an ``Output:`` user message) or, with ``tools``, tool calls and ``tool`` messages."""

    def __init__(self, traj: Trajectory, strategy: str, actions: str | None = None, reasoning: bool = False):
        self.language, self.strategy = traj.env, strategy
        self.tools = actions_of(traj, actions) == TOOLS
        self.reasoning = reasoning
        self._ids: dict[int, str] = {}     # each turn's call id, unique in the conversation

    def action(self, turn: Turn, code: str, thought: str | None = None, own: bool = False) -> dict[str, Any]:
        """The assistant message proposing ``code`` (at ``turn``); ``own``: the model's own
        message, which keeps its reasoning when asked."""
        if not self.tools:
            return assistant(reply(code, self.language, self.strategy, thought), turn if own else None,
                             self.reasoning)
        run = toolset(self.language)
        message = self._call(turn, run.run, {run.arg: code}, thought)
        if own and self.reasoning and turn.reasoning:
            message["reasoning_content"] = turn.reasoning
        return message

    def submit(self, arg: str | None = None) -> dict[str, Any]:
        if not self.tools:
            return {"role": "assistant", "content": submit_text(self.language, arg)}
        name = toolset(self.language).submit_arg
        return self._call(None, SUBMIT_TOOL, {name: arg} if name and arg else {}, None)

    def _call(self, turn: Turn | None, name: str, args: dict[str, Any], thought: str | None) -> dict[str, Any]:
        content = (thought or "").strip() if self.strategy == "react" else ""
        return {"role": "assistant", "content": content or None,
                "tool_calls": [wire_call({"id": self.call_id(turn), "name": name,
                                          "arguments": json.dumps(args, ensure_ascii=False)})]}

    def call_id(self, turn: Turn | None) -> str:
        """The recorded call's id when the model's own call ran (and no earlier call of the
        conversation has it: some servers count from 0 in every reply), else one made from the turn."""
        if turn is None:
            return "call_submit"
        if turn.index not in self._ids:
            recorded = (turn.info.get("tool_call") or {}).get("id")
            own = recorded and turn.author not in (HUMAN, AGENT_EDITED) and str(recorded) not in self._ids.values()
            self._ids[turn.index] = str(recorded) if own else f"call_{turn.index}"
        return self._ids[turn.index]

    def output(self, turn: Turn) -> dict[str, Any]:
        if not self.tools:
            return {"role": "user", "content": output_message(turn)}
        return {"role": "tool", "tool_call_id": self.call_id(turn), "content": output_message(turn, prefix="")}

    def schemas(self) -> list[dict[str, Any]] | None:
        return tool_schemas(self.language) if self.tools else None


def _head(traj: Trajectory, strategy: str, protocol: str | None, actions: str | None = None) -> list[dict[str, Any]]:
    task = task_of(traj)
    system = prompts.system_prompt(task.env, strategy, protocol_of(traj, protocol), traj.sandbox,
                                   actions=actions_of(traj, actions))
    return [{"role": "system", "content": system}, {"role": "user", "content": prompts.task_message(task)}]


def _ends_by_submit(traj: Trajectory, protocol: str | None) -> bool:
    return traj.status == "submitted" and protocol_of(traj, protocol) != "intercode"


def submitted_arg(traj: Trajectory) -> str | None:
    return traj.submitted_arg


def submit_text(language: str, arg: str | None) -> str:
    """``submit`` as the model has to write it: with its argument where the language's submit
    takes one (CTF's flag, Python's function name), as the system prompt asks."""
    spec = find_language(language)
    takes_arg = spec is not None and spec.prompts.submit_arg
    return f"submit {arg}" if takes_arg and arg else "submit"


# Per-message learning weights, in OpenAI's fine-tuning convention (also axolotl's): ``weight``
# 1 on an assistant message to learn from, 0 on one only there for context.
LEARN, CONTEXT = 1, 0


@dataclass
class Conversation:
    """Chat messages and, per message, who wrote it (None for system, task and outputs)."""

    messages: list[dict[str, Any]]
    authors: list[str | None]

    def add(self, message: dict[str, Any], author: str | None = None, weight: int | None = None) -> None:
        if weight is not None:
            message["weight"] = weight
        self.messages.append(message)
        self.authors.append(author)

    def pop(self) -> None:
        self.messages.pop()
        self.authors.pop()


def rejection_message(turn: Turn, replies: "Replies") -> dict[str, Any]:
    """What the model was told after a proposal was rejected (the reviewer's comment)."""
    text = (f"A human reviewer rejected this {prompts.unit(replies.language)} without running it. "
            f"Their comment: {turn.comment or 'no reason given'}")
    if replies.tools:
        return {"role": "tool", "tool_call_id": replies.call_id(turn), "content": text}
    return {"role": "user", "content": text}


def author_of(turn: Turn) -> str:
    """Who wrote the turn's action: a branch's replayed turn names the recorded turn's author."""
    recorded = turn.info.get("recorded")
    author = recorded.get("author") if isinstance(recorded, dict) else None
    return author if author in (HUMAN, AGENT, AGENT_EDITED) else turn.author


def add_turns(conv: Conversation, turns: list[Turn], replies: "Replies", rejected: bool = True) -> None:
    """Each turn that ran (its action, learned from, then its output) and, with ``rejected``,
    each rejected proposal (not learned from, then the reviewer's comment)."""
    for turn in turns:
        if turn.info.get("rejected"):
            if rejected and turn.proposed and turn.proposed != "submit":
                conv.add(replies.action(turn, turn.proposed, turn.thought, own=True), KIND_REJECTED, CONTEXT)
                conv.add(rejection_message(turn, replies))
            continue
        if not turn.action or turn.info.get("invalid"):
            continue
        conv.add(replies.action(turn, turn.action, turn.thought, own=turn.author != HUMAN), author_of(turn), LEARN)
        conv.add(replies.output(turn))


def chat_conversation(traj: Trajectory, strategy: str = "tryagain", protocol: str | None = None,
                      actions: str | None = None, reasoning: bool = False, rejected: bool = True) -> Conversation:
    """The episode as a conversation: the system prompt, the task, then each turn (see
    ``add_turns``) and ``close_conversation``."""
    replies = Replies(traj, strategy, actions, reasoning)
    conv = Conversation(_head(traj, strategy, protocol, actions), [None, None])
    add_turns(conv, traj.turns, replies, rejected)
    close_conversation(conv, traj, replies, protocol)
    return conv


def close_conversation(conv: Conversation, traj: Trajectory, replies: "Replies", protocol: str | None) -> None:
    """``submit`` (with its argument) last when the episode was submitted under the agent
    protocol; else a trailing output is left out (a chat ends with the assistant)."""
    if _ends_by_submit(traj, protocol) and len(conv.messages) > 2:
        conv.add(replies.submit(submitted_arg(traj)), _submitter(traj), LEARN)
    elif conv.messages[-1]["role"] in ("user", "tool") and len(conv.messages) > 2:
        conv.pop()


def _submitter(traj: Trajectory) -> str:
    """Who the submit is credited to: the agent in an agent's episode (trajectories do not
    record whether the reviewer or the agent ended it), the human in human play."""
    return HUMAN if traj.policy.get("kind", "human") == "human" else AGENT


def chat_record(traj: Trajectory, strategy: str = "tryagain", protocol: str | None = None,
                actions: str | None = None, reasoning: bool = False, rejected: bool = True) -> dict[str, Any]:
    """One line of chat export: ``messages`` (assistant messages weighted 1 or 0), ``tools``
    under the tools protocol, and ``metadata`` (the episode, its outcome, each message's author)."""
    conv = chat_conversation(traj, strategy, protocol, actions, reasoning, rejected)
    record: dict[str, Any] = {"messages": conv.messages}
    schemas = Replies(traj, strategy, actions).schemas()
    if schemas is not None:
        record["tools"] = schemas
    record["metadata"] = {**episode_metadata(traj), "message_authors": conv.authors}
    return record


def episode_metadata(traj: Trajectory) -> dict[str, Any]:
    """What a record needs to be filtered after export: the task, the episode and attempt, who
    played (annotator, model), and the outcome (reward, solved, strict verdict)."""
    strict = traj.strict if isinstance(traj.strict, dict) else None
    return {"task": {"set": str(traj.task.get("set", "")), "id": str(traj.task.get("id", "")), "env": traj.env},
            "episode": traj.id, "attempt": traj.attempt, "annotator": traj.annotator,
            "after_gold_seen": traj.after_gold_seen, "model": traj.policy.get("model"),
            "policy": traj.policy.get("kind", "human"), "author": episode_author(traj), "status": traj.status,
            "reward": traj.reward, "best_reward": best_reward(traj), "solved": traj.solved,
            "strict": {"solved": traj.strictly_solved, "reasons": traj.strict_reasons}
            if strict is not None or traj.strictly_solved is not None else None,
            "forked_from": traj.forked_from}


def preference_pairs(traj: Trajectory, strategy: str = "tryagain",
                     protocol: str | None = None, actions: str | None = None,
                     reasoning: bool = False) -> list[dict[str, Any]]:
    """One pair per edited or rejected proposal: ``prompt`` = the conversation up to it,
    ``rejected`` = the agent's proposal, ``chosen`` = what the human ran instead. A rejection
    pairs the next human action when no other action ran in between; else it is left out."""
    replies = Replies(traj, strategy, actions, reasoning)
    head = _head(traj, strategy, protocol, actions)
    history: list[dict[str, Any]] = []
    pairs = []
    for i, turn in enumerate(traj.turns):
        chosen, kind = _chosen_instead(traj.turns, i)
        if chosen is not None:
            proposed = turn.proposed or ""
            pair = {
                "prompt": head + list(history),
                "chosen": [replies.action(chosen, chosen.action)],
                "rejected": [replies.action(turn, proposed, turn.thought, own=True)],
                "kind": kind, "comment": turn.comment, "task": traj.task_key, "turn": turn.index,
                "episode": traj.id,
            }
            if replies.tools:
                pair["tools"] = replies.schemas()
            pairs.append(pair)
        if turn.action and not turn.info.get("invalid") and not turn.info.get("rejected"):
            history.append(replies.action(turn, turn.action, turn.thought, own=turn.author != HUMAN))
            history.append(replies.output(turn))
    return pairs


def _chosen_instead(turns: list[Turn], i: int) -> tuple[Turn | None, str | None]:
    """What a human ran instead of turn ``i``'s proposal, and how: its edit ("edit"), or after a
    rejection the next action when a human ran it ("reject"); (None, None) otherwise."""
    turn = turns[i]
    if turn.author == AGENT_EDITED and turn.action and turn.proposed is not None:
        return turn, "edit"
    if not (turn.info.get("rejected") and turn.proposed and turn.proposed != "submit"):
        return None, None
    return _human_after_rejection(turns[i + 1:])


def _human_after_rejection(later_turns: list[Turn]) -> tuple[Turn | None, str | None]:
    """The next action that ran after a rejection, when a human ran it (else (None, None))."""
    for later in later_turns:
        if later.info.get("rejected") or not later.action or later.info.get("invalid"):
            continue
        return (later, "reject") if later.author in (HUMAN, AGENT_EDITED) else (None, None)
    return None, None


def demonstration(traj: Trajectory, strategy: str = "tryagain", protocol: str | None = None) -> str:
    """One solved episode as text in the strategy's reply format, for a system prompt."""
    task = task_of(traj)
    lines = [prompts.task_message(task)]
    for turn in executed(traj):
        lines.append(reply(turn.action, task.env, strategy, turn.thought))
        lines.append(output_message(turn, DEMO_OBSERVATION_CHARS))
    if _ends_by_submit(traj, protocol):
        lines.append("submit")
    return "\n".join(lines)


def fewshot_file(trajs: list[Trajectory], strategy: str, protocol: str | None) -> dict[str, Any]:
    return {"format": FEWSHOT_FORMAT, "strategy": strategy,
            "demos": [{"env": t.env, "task": t.task_key, "query": t.task.get("query", ""),
                       "text": demonstration(t, strategy, protocol)} for t in trajs]}


def _read_demos_file(path: Path) -> Any:
    """The JSON in a demonstrations file, or an ExportError that names the file and what is wrong."""
    try:
        return json.loads(read_json_text(path, "a demonstrations file"))    # a regular file, capped, never blocking
    except FileNotFoundError:
        raise ExportError(f"{path}: no such file") from None
    except JsonFileError as exc:
        raise ExportError(str(exc)) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ExportError(f"{path}: not a demonstrations file ({exc})") from None


def load_demos(path: str | Path, env: str) -> list[str]:
    """The demonstrations for ``env`` in a file ``icplay export fewshot`` wrote."""
    path = Path(path)
    data = _read_demos_file(path)
    if not isinstance(data, dict) or data.get("format") != FEWSHOT_FORMAT or not isinstance(data.get("demos"), list):
        raise ExportError(f"{path}: not a demonstrations file (write one with `icplay export fewshot`)")
    demos = [str(d.get("text", "")) for d in data["demos"] if isinstance(d, dict) and d.get("env") == env]
    if not demos:
        raise ExportError(f"{path}: holds no demonstration for {env}")
    return demos


# --- preference pairs grounded in outcomes ---------------------------------------------------

# Preference pairs grounded in outcomes: branches played from the same prefix, paired when
# their scores differ, the better scored ``chosen``.
# 
# ``icplay branch`` (icplay/review/branch.py) plays several continuations from the state
# before one turn of an episode and saves each as an episode whose ``forked_from`` names the
# parent, the turn and the branch (``recorded``, ``correction``, ``proposal``, ``sample``).
# Branches of the same parent and turn share their prefix; two of them whose outcomes differ
# (the final reward, then the strict verdict) make one pair: ``prompt`` is the conversation up
# to the turn, ``chosen`` and ``rejected`` the two continuations to their end (the actions,
# their outputs and the submit), ``chosen_reward``/``rejected_reward`` and the ``*_source``
# fields say what each side scored and where it came from. Authorship never decides: a human's
# correction that scored worse than the agent's proposal is the ``rejected`` side.

OUTCOME, AUTHORSHIP = "outcome", "authorship"
AUTHORSHIP_NOTE = ("paired by who wrote it (the human's action chosen over the agent's proposal), not by outcome: "
                   "no score backs this pair")


def branch_key(traj: Trajectory) -> tuple[str, int] | None:
    """(parent episode, turn) of a branch ``icplay branch`` saved; None for other episodes."""
    origin = traj.forked_from or {}
    if not origin.get("branch") or not isinstance(origin.get("turn"), int):
        return None
    return str(origin.get("id")), int(origin["turn"])


def branch_groups(trajs: Iterable[Trajectory]) -> dict[tuple[str, int], list[Trajectory]]:
    """Scored branches by (parent, turn), in the order given."""
    groups: dict[tuple[str, int], list[Trajectory]] = {}
    for traj in trajs:
        key = branch_key(traj)
        if key is not None and traj.status == "submitted" and traj.reward is not None:
            groups.setdefault(key, []).append(traj)
    return groups


def outcome(traj: Trajectory) -> tuple[float, int]:
    """How well a branch did: its final reward, then a strict solve over none."""
    return float(traj.reward or 0.0), 1 if traj.strictly_solved else 0


def split(traj: Trajectory, turn: int, strategy: str, protocol: str | None, actions: str | None,
          reasoning: bool) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[str | None]]:
    """The branch as (prompt: the conversation before ``turn``, continuation: from it to the
    end, the continuation's authors). The prompt ends with an output or the task, the
    continuation with the assistant."""
    replies = Replies(traj, strategy, actions, reasoning)
    conv = Conversation(_head(traj, strategy, protocol, actions), [None, None])
    add_turns(conv, traj.turns[:turn], replies)
    cut = len(conv.messages)
    add_turns(conv, traj.turns[turn:], replies)
    close_conversation(conv, traj, replies, protocol)
    return conv.messages[:cut], conv.messages[cut:], conv.authors[cut:]


def source(traj: Trajectory, authors: list[str | None]) -> dict[str, Any]:
    origin = traj.forked_from or {}
    return {"episode": traj.id, "branch": origin.get("branch"), "model": traj.policy.get("model"),
            "authors": sorted({a for a in authors if a})}


def outcome_pairs(group: list[Trajectory], strategy: str = "tryagain", protocol: str | None = None,
                  actions: str | None = None, reasoning: bool = False) -> list[dict[str, Any]]:
    """Every two branches of one prefix whose outcomes differ, the better scored ``chosen``
    (two continuations with the same text are not a pair whatever they scored)."""
    parts = {t.id: split(t, branch_key(t)[1], strategy, protocol, actions, reasoning)   # type: ignore[index]
             for t in group}
    pairs = []
    for a, b in combinations(group, 2):
        if outcome(a) == outcome(b):
            continue
        chosen, rejected = (a, b) if outcome(a) > outcome(b) else (b, a)
        prompt, chosen_part, chosen_authors = parts[chosen.id]
        _, rejected_part, rejected_authors = parts[rejected.id]
        if not chosen_part or not rejected_part or chosen_part == rejected_part:
            continue
        parent, turn = branch_key(chosen)   # type: ignore[misc]
        pair = {"prompt": prompt, "chosen": chosen_part, "rejected": rejected_part, "pairing": OUTCOME,
                "chosen_reward": chosen.reward, "rejected_reward": rejected.reward,
                "chosen_strict": chosen.strictly_solved, "rejected_strict": rejected.strictly_solved,
                "chosen_source": source(chosen, chosen_authors), "rejected_source": source(rejected, rejected_authors),
                "task": chosen.task_key, "parent": parent, "turn": turn}
        if (schemas := Replies(chosen, strategy, actions).schemas()) is not None:
            pair["tools"] = schemas
        pairs.append(pair)
    return pairs


def preference_records(trajs: list[Trajectory], strategy: str = "tryagain", protocol: str | None = None,
                       actions: str | None = None, reasoning: bool = False,
                       by_authorship: bool = False) -> list[dict[str, Any]]:
    """Outcome pairs of every branch group; with ``by_authorship`` also the old pairs of a
    human's edit or rejection against the agent's proposal, each marked so and without
    scores, except where branches of that turn exist (then their outcomes decide)."""
    groups = branch_groups(trajs)
    records = [p for group in groups.values() for p in outcome_pairs(group, strategy, protocol, actions, reasoning)]
    if by_authorship:
        for traj in trajs:
            if branch_key(traj) is not None:
                continue
            for pair in preference_pairs(traj, strategy, protocol, actions, reasoning):
                if (traj.id, pair["turn"]) in groups:
                    continue
                records.append({**pair, "pairing": AUTHORSHIP, "note": AUTHORSHIP_NOTE,
                                "chosen_reward": None, "rejected_reward": None})
    return records


# --- InterCode's results format ------------------------------------------------------------


def intercode_observation(turn: Turn) -> str:
    """The observation as InterCode recorded it: icplay's ``[icplay: ...]`` notes dropped.
    """
    lines = (turn.observation or "").split("\n")
    while lines and lines[-1].startswith("[icplay: "):
        lines.pop()
    return "\n".join(lines)


def _no_code(language: str) -> str:
    name = {"sql": "SQL", "bash": "Bash", "python": "Python", "ctf": "Bash"}.get(language, language)
    return f"No {name} code was found in your last response.\n\nYour response should be a {name} command."


def task_indexes(trajs: list[Trajectory]) -> dict[tuple[str, str], int]:
    """Each episode's task index within its set (InterCode names tasks by index)."""
    out: dict[tuple[str, str], int] = {}
    for set_name in sorted({str(t.task.get("set", "")) for t in trajs}):
        env = next(t.env for t in trajs if str(t.task.get("set", "")) == set_name)
        try:
            tasks = find_set(set_name, env).load()
        except (OSError, ValueError):   # a set not here or unreadable (TaskFileError is a ValueError):
            tasks = []                  # its episodes' own recorded index is used, or the export says why not
        for i, task in enumerate(tasks):
            out[(set_name, task.id)] = i
    for t in trajs:
        key = (str(t.task.get("set", "")), str(t.task.get("id", "")))
        if key not in out:
            index = str(t.task.get("index", t.task.get("id")))
            if not index.isdigit():
                raise ExportError(f"{t.task_key}: its task set is not known here, so its task index is not either")
            out[key] = int(index)
    return out


def _intercode_step(turn: Turn, env: str) -> tuple[str, str, float | None, bool]:
    """One counted turn as InterCode records it: a reply with no action is the raw reply,
    InterCode's no-code observation, reward 0 and not valid."""
    invalid = bool(turn.info.get("invalid"))
    action = str(turn.info.get("raw") or "") if invalid else turn.action
    observation = _no_code(env) if invalid else intercode_observation(turn)
    reward = 0.0 if invalid and turn.reward is None else turn.reward
    return action, observation, reward, not invalid


def _turn_history(t: Trajectory) -> tuple[list[str], list[str], list[float | None], list[bool]]:
    """InterCode's actions, observations, rewards and valid flags of the counted turns."""
    actions: list[str] = []
    observations: list[str] = []
    rewards: list[float | None] = []
    valid: list[bool] = []
    for turn in (turn for turn in t.turns if turn.counts):
        action, observation, reward, ok = _intercode_step(turn, t.env)
        actions.append(action)
        observations.append(observation)
        rewards.append(reward)
        valid.append(ok)
    if rewards and rewards[-1] is None and t.reward is not None:
        rewards[-1] = t.reward
    return actions, observations, rewards, valid


def intercode_results(trajs: list[Trajectory]) -> dict[str, Any]:
    """InterCode's results file (``turn_history``) of icplay episodes. Counted turns only:
    an unparsable reply is InterCode's no-code turn; a turn's reward is its recorded
    per-turn reward, or for the last turn the final reward."""
    indexes = task_indexes(trajs)
    out: dict[str, Any] = {}
    for n, t in enumerate(trajs):
        actions, observations, rewards, valid = _turn_history(t)
        scored = [r for r in rewards if r is not None]
        best = max(scored) if scored else None
        out[str(n)] = {
            "environment": f"ic_{t.env}", "dataset": str(t.task.get("set", "")),
            "task_id": indexes[(str(t.task.get("set", "")), str(t.task.get("id", "")))],
            "query": t.task.get("query", ""), "gold": t.task.get("gold", ""),
            "turn_history": {"actions": actions, "observations": observations, "rewards": rewards,
                             "valid_action": valid},
            "summary": {"max_reward": best, "max_reward_idx": rewards.index(best) if best is not None else None,
                        "turns_taken": len(actions), "turns_max": t.policy.get("max_turns")},
            "hardness": t.task.get("hardness"), "set": str(t.task.get("set", "")), "icplay_id": t.id,
            "icplay_strict": t.strictly_solved,
        }
    return out


# --- CSV -----------------------------------------------------------------------------------

CSV_COLUMNS = ("set", "task", "env", "episode", "who", "author", "policy", "model", "strategy", "protocol",
               "status", "turns", "agent_turns", "edited_turns", "human_turns", "rejected", "invalid",
               "final_reward", "best_reward", "solved", "strict", "strict_reasons", "time_worked", "tokens", "cost",
               "started_at", "query", "annotator", "attempt", "after_gold_seen")


def csv_text(trajs: list[Trajectory]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for t in trajs:
        mix = t.author_mix()
        p = t.policy
        who = p.get("model") or p.get("kind", "human")
        writer.writerow([t.task.get("set", ""), t.task.get("id", ""), t.env, t.id, who, episode_author(t),
                         p.get("kind", "human"), p.get("model", ""), p.get("strategy", ""), p.get("protocol", ""),
                         t.status, t.turns_taken, mix[KIND_AGENT], mix[KIND_EDITED], mix[KIND_HUMAN],
                         mix[KIND_REJECTED], mix[KIND_INVALID], "" if t.reward is None else t.reward,
                         "" if best_reward(t) is None else best_reward(t), int(t.solved),
                         "" if t.strictly_solved is None else int(t.strictly_solved), "; ".join(t.strict_reasons),
                         round(t.time_worked, 3),
                         t.tokens, "" if t.cost is None else round(t.cost, 6), round(t.started_at, 3),
                         t.task.get("query", ""), t.annotator or "", "" if t.attempt is None else t.attempt,
                         int(t.after_gold_seen)])
    return buf.getvalue()


# --- writing -------------------------------------------------------------------------------


def _training_records(fmt: str, trajs: list[Trajectory], strategy: str, protocol: str | None,
                      actions: str | None, reasoning: bool, options: "TrainingOptions") -> list[dict[str, Any]]:
    """Chat records (those with an exchange beyond the task) or preference pairs."""
    if fmt == "chat":
        chats = [chat_record(t, strategy, protocol, actions, reasoning, options.rejected) for t in trajs]
        return [c for c in chats if len(c["messages"]) > 2]
    return preference_records(trajs, strategy, protocol, actions, reasoning, options.by_authorship)


@dataclass(frozen=True)
class TrainingOptions:
    """``rejected``: chat keeps rejected proposals (weight 0) and the reviewer's comment;
    ``by_authorship``: preference data also pairs a human's correction over the agent's
    proposal where no branch scored them (each such record says so)."""

    rejected: bool = True
    by_authorship: bool = False


def render(fmt: str, trajs: list[Trajectory], strategy: str = "tryagain", protocol: str | None = None,
           actions: str | None = None, reasoning: bool = False,
           options: TrainingOptions = TrainingOptions()) -> tuple[str, int]:
    """The file text of ``fmt`` over ``trajs`` and how many records it holds (``actions``: the
    reply format of chat and preference data, text or tools, default each episode's own;
    ``reasoning``: chat and preference records keep the model's reasoning)."""
    if fmt in ("chat", "preference"):
        records = _training_records(fmt, trajs, strategy, protocol, actions, reasoning, options)
        return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), len(records)
    if fmt == "fewshot":
        data = fewshot_file(trajs, strategy, protocol)
        return json.dumps(data, ensure_ascii=False, indent=1) + "\n", len(data["demos"])
    if fmt == "intercode":
        data = intercode_results(trajs)
        return json.dumps(data, ensure_ascii=False, indent=1) + "\n", len(data)
    if fmt == "csv":
        return csv_text(trajs), len(trajs)
    raise ExportError(f"unknown format {fmt!r} (one of: {', '.join(FORMATS)})")
