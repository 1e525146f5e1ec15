"""Record Bash episodes with InterCode's OWN environment (not icplay), in InterCode's results
format (``turn_history``), so that ``icplay rescore`` can be measured against them.

Run it with a Python that has InterCode's package (``pip install intercode-bench``), not
icplay's venv; one file system per process (InterCode's timeout uses SIGALRM)::

    /work/icvenv/bin/python bench/record_intercode_bash.py 1 /work/recordings/intercode-bash-fs1.json

The policy is scripted, so a re-run records the same actions: per task (1) ``ls``, (2) a
variant of the gold (its last pipeline stage dropped, else ``| head -n 3`` appended),
(3) the gold. After each action the episode is scored as InterCode's Try-Again loop
(``experiments/eval_n_turn.py``) scores it: ``env.step("submit")`` right after the action,
which resets and re-runs the gold in the eval container and compares; the loop stops at a
reward of 1.0. InterCode's ``IMAGE_TO_SETTINGS`` knows only the image name
``intercode-nl2bash``; the four images built from its Dockerfile are named ``-fsN`` here, so
the script registers them with the same shell (``/bin/bash``). Its two containers
(``<image>_ic_ctr``, ``<image>_ic_ctr_eval``) are removed at the end.
"""

from __future__ import annotations

import json
import sys
import time


def variant(gold: str) -> str:
    """A plausible near-miss of the gold: deterministic, so a re-run records the same."""
    if " | " in gold:
        return gold.rsplit(" | ", 1)[0]
    return gold + " | head -n 3"


def open_env(fs: int, tasks_path: str):
    """InterCode's ``BashEnv`` on image ``intercode-nl2bash-fsN`` (registered with /bin/bash)."""
    import docker
    from intercode.envs.bash import bash_env

    image = f"intercode-nl2bash-fs{fs}"
    bash_env.IMAGE_TO_SETTINGS[image] = "/bin/bash"
    # InterCode's get_container lists every container on the machine (inspecting each);
    # on a machine where other jobs remove containers all the time that listing fails
    # (docker.errors.NotFound). The same steps by name: reuse the container, or run one.
    from intercode.envs import ic_env

    def get_container(name: str, image_name: str):
        client = docker.from_env()
        try:
            container = client.containers.get(name)
            if container.status != "running":
                container.start()
                time.sleep(3)
            return container
        except docker.errors.NotFound:
            return client.containers.run(image=client.images.get(image_name), name=name, detach=True, tty=True)

    ic_env.get_container = bash_env.get_container = get_container
    return bash_env.BashEnv(image, data_path=tasks_path, traj_dir=None, verbose=False)


def close_env(env) -> None:
    """Remove InterCode's two containers (``<image>_ic_ctr``, ``<image>_ic_ctr_eval``)."""
    import docker

    client = docker.from_env()
    for name in (env.container_name, env.ctr_name_eval):
        try:
            client.containers.get(name).remove(force=True)
        except Exception:
            pass


def record(fs: int, out: str, tasks_path: str) -> None:
    from intercode.envs.ic_env import ACTION_EXEC

    env = open_env(fs, tasks_path)
    results = {}
    started = time.time()
    try:
        for index in range(len(env.data_loader)):
            env.reset(index)
            gold = env.gold
            history = {"actions": [], "observations": [], "rewards": [], "valid_action": []}
            for action in ("ls", variant(gold), gold):
                observation, _, _, info = env.step(action)
                valid = bool(info.get(ACTION_EXEC, False))
                _, reward, _, info = env.step("submit")
                history["actions"].append(action)
                history["observations"].append(str(observation))
                history["rewards"].append(reward)
                history["valid_action"].append(valid)
                if reward == 1:
                    break
            results[str(index)] = {
                "environment": "ic_bash", "dataset": f"nl2bash_fs_{fs}", "task_id": index,
                "query": env.query, "gold": gold, "turn_history": history,
                "summary": {"max_reward": max(history["rewards"]), "max_reward_idx":
                            history["rewards"].index(max(history["rewards"])),
                            "turns_taken": len(history["actions"]), "turns_max": 3},
            }
            print(f"fs{fs} {index}: {history['rewards']}", file=sys.stderr, flush=True)
    finally:
        close_env(env)
    with open(out, "w") as f:
        json.dump(results, f, indent=1)
    print(f"fs{fs}: {len(results)} episodes in {time.time() - started:.0f} s -> {out}", file=sys.stderr)


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        sys.exit("usage: record_intercode_bash.py FS OUT.json [TASKS.json]")
    fs = int(sys.argv[1])
    tasks = sys.argv[3] if len(sys.argv) == 4 else f"/work/shared/intercode/nl2bash/nl2bash_fs_{fs}.json"
    record(fs, sys.argv[2], tasks)
