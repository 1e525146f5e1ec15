"""Bash on Docker: persistent-session step vs one `docker exec` per action, reset, submit;
and the start of a faithful container (a task's own image, here debian:bookworm-slim: the
warden, and pids handed out before the shell's exec and before its first action) against a
bare container whose shell is a plain `docker exec`.

Run: .venv/bin/python bench/bench_bash.py [--n 200] [--episodes 15]
Prints medians and the ratio of the two step methods, all measured in this one run.
The episode loop is realistic: reset, one action, submit with reward, then the next.
"""

from __future__ import annotations

import argparse
import statistics
import time

from icplay.languages import make_env
from icplay.sandbox.docker import DockerSandbox
from icplay.sandbox.images import IMAGES, docker_client, ensure_image
from icplay.tasks.model import Task


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=200, help="trivial actions per step method")
    parser.add_argument("--episodes", type=int, default=15)
    args = parser.parse_args()
    client = docker_client()
    ensure_image(client, "bash", print)
    image = IMAGES["bash"].name

    box = DockerSandbox(client, image)
    box.start()
    try:
        for _ in range(10):
            box.run("true")
        persistent = []
        for _ in range(args.n):
            t0 = time.perf_counter()
            box.run("true")
            persistent.append(time.perf_counter() - t0)
        per_exec = []
        for _ in range(max(20, args.n // 4)):
            t0 = time.perf_counter()
            box.container.exec_run(["bash", "-c", "true"])
            per_exec.append(time.perf_counter() - t0)
    finally:
        box.close()

    env = make_env("bash", sandbox="docker")
    gold = "mkdir -p /testbed/out && ls /testbed | sort > /testbed/out/listing.txt && wc -l /testbed/out/listing.txt"
    resets, submits, rescores = [], [], []
    try:
        for i in range(args.episodes + 1):
            # A new task each episode, so every episode needs a gold run (fetched ahead at reset,
            # in the gold's own recycled container, while the solver thinks).
            task = Task(id=f"bench{i}", set="bench", env="bash", query="bench", gold=gold)
            time.sleep(0.5)  # a solver's thinking time; the pool refills meanwhile
            t0 = time.perf_counter()
            env.reset(task)
            reset_time = time.perf_counter() - t0
            env.step(task.gold)
            time.sleep(0.5)
            t0 = time.perf_counter()
            result = env.submit()
            submit_time = time.perf_counter() - t0
            t0 = time.perf_counter()
            again = env.submit()  # the intercode protocol scores after every action
            rescore_time = time.perf_counter() - t0
            assert result.reward == 1.0 == again.reward, result.breakdown
            if i:  # the first episode warms the pool
                resets.append(reset_time)
                submits.append(submit_time)
                rescores.append(rescore_time)
    finally:
        env.close()

    # Without a spare ready: what one container plus its shell costs to start.
    cold = []
    for _ in range(5):
        t0 = time.perf_counter()
        box = DockerSandbox(client, image)
        box.start()
        cold.append(time.perf_counter() - t0)
        box.close()

    faithful, execd = faithful_starts(client)
    before, facts = scoring_costs(client, image, max(10, args.episodes))

    p, e = median_ms(persistent), median_ms(per_exec)
    print(f"step, persistent session : median {p:8.3f} ms over {len(persistent)} actions")
    print(f"step, docker exec each   : median {e:8.3f} ms over {len(per_exec)} actions")
    print(f"ratio exec / persistent  : {e / p:8.1f}x")
    print(f"reset                    : median {median_ms(resets):8.1f} ms (max {max(resets)*1000:.0f} ms) over {len(resets)} episodes")
    print(f"cold start, no spare     : median {median_ms(cold):8.1f} ms (container + shell)")
    print(f"submit with reward       : median {median_ms(submits):8.1f} ms (max {max(submits)*1000:.0f} ms), "
          "gold run fetched at reset")
    print(f"scoring again, same task : median {median_ms(rescores):8.1f} ms (gold result kept)")
    b, g = median_ms(before), median_ms(facts)
    print(f"scoring facts, before    : median {b:8.1f} ms (git status, then the hash script: two side commands, each through today's frozen exec)")
    print(f"scoring facts, hardened  : median {g:8.1f} ms (bash_facts: both listings and hashes, sandbox frozen)")
    print(f"ratio hardened / before  : {g / b:8.2f}x")
    f, x = median_ms(faithful), median_ms(execd)
    print(f"faithful start + action  : median {f:8.1f} ms (warden, pids numbered alike)")
    print(f"bare start + action      : median {x:8.1f} ms (container, then a docker exec'd shell)")
    print(f"ratio faithful / bare    : {f / x:8.2f}x")


# The scoring's side commands before the reward-integrity work (issue 19): git with the
# repository's own configuration, then a hash script, as two side commands.
BEFORE_HASH = r"""
for p in "$@"; do
  if [ -d "$p" ]; then h=$(cd "$p" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 -r md5sum | md5sum | cut -d' ' -f1)
  elif [ -f "$p" ]; then h=$(md5sum < "$p" 2>/dev/null | cut -d' ' -f1); fi
  printf '%s\t%s\n' "$p" "$h"
done
"""


def scoring_costs(client, image: str, n: int) -> tuple[list[float], list[float]]:
    """What a submit spends reading the agent's container: the two side commands it ran
    before against ``bash_facts.gather`` (one script, frozen, private GIT_DIR), interleaved
    on one container with an added and a modified file."""
    from icplay.envs.bash_facts import gather

    box = DockerSandbox(client, image)
    box.start()
    before, facts = [], []
    try:
        box.run("echo x > /testbed/new.txt; echo y >> /testbed/README.md")
        for _ in range(n):
            t0 = time.perf_counter()
            box.exec(["timeout", "60", "git", "status", "--short"])
            box.exec(["timeout", "60", "bash", "-c", BEFORE_HASH, "hash", "testbed/new.txt"])
            before.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            gather(box)
            facts.append(time.perf_counter() - t0)
    finally:
        box.close()
    return before, facts


def faithful_starts(client, image: str = "debian:bookworm-slim", n: int = 8) -> tuple[list[float], list[float]]:
    """Start + first action of a faithful container, and of a bare container whose shell
    is a plain ``docker exec`` (no warden, no pids handed out), interleaved."""
    from icplay.sandbox.streams import ExecSocketTransport as _ExecSocketTransport

    faithful, execd = [], []
    for _ in range(n):
        t0 = time.perf_counter()
        box = DockerSandbox(client, image)
        box.start()
        box.run("true")
        faithful.append(time.perf_counter() - t0)
        box.close()
        t0 = time.perf_counter()
        container = client.containers.run(image, ["sleep", "infinity"], detach=True, network_mode="none")
        try:
            created = client.api.exec_create(container.id, ["bash", "--noprofile", "--norc"], stdin=True)
            shell = _ExecSocketTransport(client.api.exec_start(created["Id"], socket=True))
            shell.write(b"true; echo ready\n")
            seen = b""
            while b"ready" not in seen:
                seen += shell.read()
            execd.append(time.perf_counter() - t0)
            shell.close()
        finally:
            container.remove(force=True)
    return faithful, execd


if __name__ == "__main__":
    main()
