"""Bash: InterCode's reward over the container the agent leaves, against the gold's run.

The gold ran at export time in a pristine copy of the same image (icplay's own gold run);
its output, ``git status`` pairs and content hashes came in as tests/expected.json. Here
icplay's facts script (tools by absolute path under ``env -i``, git reading no
configuration or hook of the agent's) lists the agent's changes and hashes them; the
agent's answer text is /app/answer.txt (InterCode compares its last observation)."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from icplay.envs.bash_facts import gather
from icplay.envs.bash_reward import bash_reward, paths_to_hash

from icplay.harbor.verifiers.common import read_answer, run


class Here:
    """The container itself as the facts script's sandbox: its commands run from /."""

    kind = "harbor"
    pristine_git = None
    scoring_scratch = None

    def __init__(self, root: str = "/"):
        self.root = root

    def exec(self, argv: list[str], timeout: float = 30.0) -> tuple[int, str]:
        done = subprocess.run(argv, cwd=self.root, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, timeout=timeout, env={})
        return done.returncode, done.stdout.decode("utf-8", "surrogateescape")


def score(expected: dict[str, Any], root: str = "/") -> tuple[float, dict[str, Any]]:
    agent = gather(Here(root))
    if agent.errors:
        return 0.0, {"error": "; ".join(agent.errors)}
    answer = read_answer("answer.txt") or ""
    best: tuple[float, dict[str, Any]] | None = None
    for gold in expected["gold_runs"]:   # more than one: a gold whose output changes run to run
        gold_changes = [tuple(pair) for pair in gold["changes"]]
        paths = paths_to_hash(agent.changes, gold_changes)
        mine = {path: agent.hashes.get(path.rstrip("/"), "missing") for path in paths}
        theirs = {path: gold["hashes"].get(path.rstrip("/"), "missing") for path in paths}
        scored = bash_reward(agent.changes, gold_changes, mine, theirs, answer, gold["output"])
        if best is None or scored.reward > best[0]:
            best = (scored.reward, scored.to_dict())
    assert best is not None, "expected.json has no gold run"
    return best


def main() -> int:
    return run(score)


if __name__ == "__main__":
    sys.exit(main())
