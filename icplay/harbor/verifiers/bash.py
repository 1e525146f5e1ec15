"""Bash: InterCode's reward over the container the agent leaves, against the gold's run.

The gold ran at export time in a pristine copy of the same image (icplay's own gold run);
its output, ``git status`` pairs and content hashes came in as tests/expected.json. Here
icplay's facts script (tools by absolute path under ``env -i``, git reading no
configuration or hook of the agent's) lists the agent's changes and hashes them; the
agent's answer text is /app/answer.txt (InterCode compares its last observation).

Under Harbor's separate verifier this container is a fresh one: the agent's /testbed came
as a tar (the task's collect hook) and replaces the pristine one before the listing, so
git, its repository and every tool are the image's own. Run in the agent's container
(a harness without separate verifiers), the live /testbed is scored."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from icplay.envs.bash_facts import gather
from icplay.envs.bash_reward import bash_reward, paths_to_hash

from icplay.harbor.verifiers.common import LOGS, read_answer, run

TESTBED_TAR = LOGS.parent / "artifacts" / "testbed.tar"


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


def restore_testbed(root: str = "/") -> bool:
    """The agent's /testbed from its tar in place of this container's, if it came."""
    if not TESTBED_TAR.is_file():
        return False
    tools: dict[str, Any] = {"env": {}, "stdin": subprocess.DEVNULL, "capture_output": True, "timeout": 300}
    subprocess.run(["/usr/bin/rm", "-rf", "--", f"{root.rstrip('/')}/testbed"], check=True, **tools)
    done = subprocess.run(["/usr/bin/tar", "-C", root, "-xpf", str(TESTBED_TAR), "testbed"], **tools)
    if done.returncode != 0:
        raise RuntimeError(f"the agent's /testbed could not be unpacked: {done.stderr.decode(errors='replace')[-300:]}")
    return True


def score(expected: dict[str, Any], root: str = "/") -> tuple[float, dict[str, Any]]:
    restored = restore_testbed(root)
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
    return best[0], {**best[1], "scored": "the agent's /testbed, unpacked in a fresh container" if restored
                     else "the live /testbed of the agent's container"}


def main() -> int:
    return run(score)


if __name__ == "__main__":
    sys.exit(main())
