"""The rescore loop every language shares: episodes matched to their tasks, replayed
``jobs`` at a time (each worker with its own env) through the driver with the language's
turn rule (``replay_episode``), one ``TurnRecord`` per turn, and the summary of how far the
recomputed rewards agree with the recorded ones."""

from __future__ import annotations

import queue
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterable, Iterator

from icplay.driver.settings import INTERCODE_PROTOCOL
from icplay.driver.replay import Recorded, Replayed, replay
from icplay.episode import Episode
from icplay.formats.intercode import RecordedEpisode
from icplay.languages.turns import TurnRule
from icplay.tasks.model import Task, TaskFileError

AGREE_WITHIN = 0.01
OBSERVATION_KEPT = 2000   # characters of a turn's observation kept in its record

# (env or None, episode, its task) -> the episode's turn records
ReplayOne = Callable[[Any, RecordedEpisode, Task], "list[TurnRecord]"]


@dataclass
class TurnRecord:
    episode: str
    task: str
    turn: int
    action: str
    executed: bool
    recorded_reward: float | None
    reward: float
    agrees: bool | None
    observation_agrees: bool | None = None
    observation: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def turn_record(episode: RecordedEpisode, task: Task, turn: int, action: str, executed: bool,
                recorded: float | None, reward: float, observation_agrees: bool | None,
                observation: str) -> TurnRecord:
    """One turn's record: whether ``reward`` agrees with the recorded one, the observation shortened."""
    agrees = None if recorded is None else abs(reward - recorded) <= AGREE_WITHIN + 1e-9
    if len(observation) > OBSERVATION_KEPT:
        observation = observation[:OBSERVATION_KEPT] + "..."
    return TurnRecord(episode.key, task.id, turn, action, executed, recorded, reward, agrees, observation_agrees,
                      observation)


@dataclass
class Summary:
    turns: int = 0
    turns_compared: int = 0
    turns_agreeing: int = 0
    executed_turns: int = 0
    executed_agreeing: int = 0
    observations_compared: int = 0
    observations_agreeing: int = 0
    episodes: int = 0
    episodes_agreeing: int = 0
    recorded_solved: int = 0
    solved: int = 0
    disagreeing_episodes: list[str] = field(default_factory=list)

    def count_turn(self, r: TurnRecord) -> None:
        """One replayed turn: compared when it was scored, executed or not; its observation."""
        if r.agrees is not None:
            self.turns_compared += 1
            self.turns_agreeing += r.agrees
        if r.executed and r.agrees is not None:
            self.executed_turns += 1
            self.executed_agreeing += r.agrees
        if r.observation_agrees is not None:
            self.observations_compared += 1
            self.observations_agreeing += r.observation_agrees

    def lines(self) -> list[str]:
        def pct(a: int, b: int) -> str:
            return f"{100 * a / b:.1f}%" if b else "-"

        return [
            f"turns agreeing within {AGREE_WITHIN}: {self.turns_agreeing} / {self.turns_compared} "
            f"({pct(self.turns_agreeing, self.turns_compared)}); executed turns: "
            f"{self.executed_agreeing} / {self.executed_turns}",
            f"episodes whose solved status agrees: {self.episodes_agreeing} / {self.episodes} "
            f"({pct(self.episodes_agreeing, self.episodes)}); solved recorded {self.recorded_solved}, "
            f"recomputed {self.solved}",
            f"observations identical to the recorded ones: {self.observations_agreeing} / "
            f"{self.observations_compared}",
        ]


def summarize(episodes: list[RecordedEpisode], results: dict[str, list[TurnRecord]]) -> Summary:
    summary = Summary()
    for episode in episodes:
        records = results.get(episode.key, [])
        summary.turns += len(records)
        for r in records:
            summary.count_turn(r)
        recorded = [x for x in episode.rewards if x is not None]
        if not recorded:
            continue
        summary.episodes += 1
        was_solved = max(recorded) >= 1.0
        is_solved = any(r.reward >= 1.0 for r in records)
        summary.recorded_solved += was_solved
        summary.solved += is_solved
        if was_solved == is_solved:
            summary.episodes_agreeing += 1
        else:
            summary.disagreeing_episodes.append(episode.key)
    return summary


def resolve_tasks(episodes: list[RecordedEpisode], tasks: list[Task]) -> None:
    """Point every episode at its task (by id when it names one); a clear error otherwise."""
    by_id = {t.id: i for i, t in enumerate(tasks)}
    for episode in episodes:
        if episode.task_id is not None:
            if episode.task_id not in by_id:
                raise TaskFileError(episode.key, f"task {episode.task_id!r} is not in the task file")
            episode.task_index = by_id[episode.task_id]
        if not 0 <= episode.task_index < len(tasks):
            raise TaskFileError(episode.key, f"task index {episode.task_index} is outside the task file "
                                             f"({len(tasks)} tasks)")


def replay_all(episodes: list[RecordedEpisode], tasks: list[Task], make_env: Callable[[], Any] | None,
               replay_one: ReplayOne, jobs: int = 1, progress: Callable[[int, int], None] | None = None
               ) -> tuple[dict[str, list[TurnRecord]], Summary]:
    """Replay every episode with ``replay_one``, ``jobs`` at a time: worker ``i`` takes every
    ``jobs``-th episode in one env of its own (``make_env`` None: no env, ``replay_one``
    gets None). ``progress(done, total)`` and errors come back in the caller's thread."""
    resolve_tasks(episodes, tasks)
    results: dict[str, list[TurnRecord]] = {}
    done = [0]

    def work(chunk: Iterable[RecordedEpisode]) -> Iterator[tuple[str, list[TurnRecord]]]:
        env = make_env() if make_env is not None else None
        try:
            for episode in chunk:
                yield episode.key, replay_one(env, episode, tasks[episode.task_index])
        finally:
            if env is not None:
                env.close()

    def finished(key: str, records: list[TurnRecord]) -> None:
        results[key] = records
        done[0] += 1
        if progress:
            progress(done[0], len(episodes))

    if jobs <= 1:
        for key, records in work(episodes):
            finished(key, records)
        return results, summarize(episodes, results)

    out: queue.Queue = queue.Queue()
    chunks = [chunk for chunk in (episodes[i::jobs] for i in range(jobs)) if chunk]

    def run(chunk: list[RecordedEpisode]) -> None:
        try:
            for item in work(chunk):
                out.put(item)
            out.put(None)
        except BaseException as exc:   # surfaced in the caller's thread
            out.put(exc)

    threads = [threading.Thread(target=run, args=(chunk,), daemon=True) for chunk in chunks]
    for thread in threads:
        thread.start()
    ended = 0
    while ended < len(threads):
        item = out.get()
        if item is None:
            ended += 1
        elif isinstance(item, BaseException):
            raise item
        else:
            finished(*item)
    return results, summarize(episodes, results)


# (turn index, the replayed turn) -> (the observation kept, whether it agrees with the recorded one)
Observe = Callable[[int, Replayed], "tuple[str, bool | None]"]


def replay_episode(env: Any, episode: RecordedEpisode, task: Task, ran: Callable[[int], bool], rule: TurnRule,
                   observe: Observe, last: int | None = None,
                   executed: Callable[[int], bool] | None = None) -> list[TurnRecord]:
    """Replay one recorded episode on ``env`` through the driver (``icplay.driver.replay``),
    each turn planned and scored by ``rule`` (the language's turn of InterCode's loop); a turn
    for which ``ran(i)`` is False never ran when recorded and scores 0. ``observe`` reads a
    turn's observation, and whether it agrees, right after it ran. ``last``: the turns after
    that index are not replayed. ``executed(i)``: what the turn's record says (default ``ran``)."""
    turns = min(len(episode.actions), len(episode.observations), len(episode.rewards))
    actions = episode.actions[:turns if last is None else min(turns, last + 1)]
    recorded = [Recorded(action, ran=ran(i)) for i, action in enumerate(actions)]
    records: list[TurnRecord] = []

    def record(i: int, replayed: Replayed) -> None:
        observation, agrees = observe(i, replayed) if recorded[i].ran else ("", None)
        reward = replayed.result.reward if replayed.result is not None else 0.0
        records.append(turn_record(episode, task, i, actions[i], (executed or ran)(i), episode.rewards[i], reward,
                                   agrees,
                                   observation))

    replay(Episode(env, task), recorded, protocol=INTERCODE_PROTOCOL, turn_rule=rule, on_turn=record)
    return records


class RescoreError(ValueError):
    """Options a language's rescore cannot run with (one sentence)."""


def episode_counter() -> Callable[[int, int], None]:
    """A progress callback that counts replayed episodes on stderr: in place on a terminal
    (twice a second at most), else a line every ten seconds, and always the last."""
    last = [0.0]
    tty = sys.stderr.isatty()

    def progress(done: int, total: int) -> None:
        now = time.monotonic()
        if done == total or now - last[0] > (0.5 if tty else 10):
            last[0] = now
            end = "\n" if done == total or not tty else ""
            print(f"\r  {done}/{total} episodes", end=end, file=sys.stderr, flush=True)

    return progress


@dataclass
class RescorePlan:
    """One language's rescore, as its spec's ``rescore`` entry makes it from the command's
    options (``icplay rescore``): the tasks and episodes, the env factory (None: no env), the
    replay of one episode, how many at a time, the line said first, and what to print after
    the summary (``after(results)``)."""

    tasks: list[Task]
    episodes: list[RecordedEpisode]
    make_env: Callable[[], Any] | None
    replay_one: ReplayOne
    banner: str
    jobs: int = 1
    progress: Callable[[int, int], None] | None = None
    after: Callable[[dict[str, list[TurnRecord]]], None] | None = None
