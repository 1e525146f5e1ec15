"""Replay recorded Bash episodes (InterCode's results format) with InterCode's OWN
environment, turn by turn, writing the same per-turn JSON lines as ``icplay rescore --out``.

With it, every turn where ``icplay rescore --compat intercode`` disagrees with the recording
can be put beside what InterCode's env gives today on the same images: a turn InterCode's
env also gets wrong is drift of the environment (images, time, disk); one it gets right is
icplay's difference. Run it with a Python that has InterCode's package (``pip install
intercode-bench``; not icplay's venv), one file system per process (InterCode's timeout
uses SIGALRM)::

    ICVENV/bin/python bench/replay_intercode_bash.py 1 RESULTS_fs_1.json OUT.jsonl [TASKS.json] [EPISODE ...]

As InterCode's ``experiments/eval_n_turn.py`` ran them: ``env.reset(index)``, then per turn
``env.step(action)`` and ``env.step("submit")``; a turn whose recorded observation is the
policy's no-code message is not sent and scores 0. One agent and one eval container for
every episode, as InterCode had (its image registered under the ``-fsN`` name with
``/bin/bash``; its container lookup by name, as in record_intercode_bash.py). Naming
episodes replays only those (in the file's order).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from record_intercode_bash import close_env, open_env  # noqa: E402

NO_CODE = ("No Bash code", "No bash code")   # the policy's message (the action was not executed)


def replay(fs: int, results: str, out: str, tasks_path: str, only: list[str]) -> None:
    env = open_env(fs, tasks_path)
    recorded = json.loads(open(results).read())
    started = time.time()
    try:
        with open(out, "w") as sink:
            for key, episode in recorded.items():
                if only and key not in only:
                    continue
                history = episode["turn_history"]
                env.reset(int(episode["task_id"]))
                for turn, action in enumerate(history["actions"]):
                    observations = history.get("observations") or []
                    recorded_obs = observations[turn] if turn < len(observations) else None
                    executed = not str(recorded_obs or "").startswith(NO_CODE)
                    observation, reward = "", 0.0
                    if executed:
                        observation, _, _, _ = env.step(action)
                        _, reward, _, _ = env.step("submit")
                        reward = float(reward)   # numpy's, from scikit-learn's cosine
                    recorded_reward = history["rewards"][turn]
                    row = {"episode": key, "task": str(episode["task_id"]), "turn": turn, "action": action,
                           "executed": executed, "recorded_reward": recorded_reward, "reward": reward,
                           "agrees": abs(reward - recorded_reward) <= 0.01 + 1e-9,
                           "observation_agrees": None if recorded_obs is None else observation == recorded_obs,
                           "observation": str(observation)[:2000]}
                    sink.write(json.dumps(row) + "\n")
                    sink.flush()
                print(f"fs{fs} {key}: done", file=sys.stderr, flush=True)
    finally:
        close_env(env)
    print(f"fs{fs}: {time.time() - started:.0f} s -> {out}", file=sys.stderr)


if __name__ == "__main__":
    if len(sys.argv) < 4:
        sys.exit("usage: replay_intercode_bash.py FS RESULTS.json OUT.jsonl [TASKS.json] [EPISODE ...]")
    fs = int(sys.argv[1])
    rest = sys.argv[4:]
    tasks = rest.pop(0) if rest and rest[0].endswith(".json") else f"/work/shared/intercode/nl2bash/nl2bash_fs_{fs}.json"
    replay(fs, sys.argv[2], sys.argv[3], tasks, rest)
