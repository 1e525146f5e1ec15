"""Harbor / Terminal-Bench task folders played as icplay tasks: loading (one folder, a
dataset, bad folders in one sentence), the verifier's reward files, and on real Docker the
hand-written tasks of tests/data/harbor played to 1.0 and to 0.0 — by the library, `icplay
run` (gold and a scripted model through the real openai client), `play --plain` and
`watch --plain`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from icplay.cli import main
from icplay.store import load_trajectory
from icplay.tasks.model import TaskFileError
from icplay.tasks.registry import find_set, implied_env, load_tasks

sys.path.insert(0, str(Path(__file__).parent / "agents"))
from fake_openai_server import ByTask, FakeOpenAIServer, fenced  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "harbor"
COUNT = DATA / "count-errors"
JUDGED_IN_PLACE = "the verifier ran inside the container the solver worked in"


# -- loading ------------------------------------------------------------------------------


def test_a_task_folder_and_a_dataset_load_with_the_same_keys():
    one = find_set(f"harbor:{COUNT}")
    both = find_set(f"harbor:{DATA}")
    assert (one.env, both.env) == ("harbor", "harbor")
    assert [t.key for t in one.load()] == ["harbor/count-errors"]
    tasks = {t.id: t for t in both.load()}
    assert sorted(tasks) == ["count-errors", "greeting"]
    count = tasks["count-errors"]
    assert count.key == "harbor/count-errors" and count.env == "harbor"
    assert count.query.startswith("The log file /app/service.log") and count.hardness == "easy"
    assert count.tags == ("grep", "logs") and count.network is False
    settings = count.extra["harbor"]
    assert settings["verifier_timeout"] == 60.0 and settings["memory_mb"] == 512
    assert tasks["greeting"].extra["harbor"]["verifier_env"] == {"GREETING": "hello, harbor"}
    # a folder in Harbor's format names its environment by itself; a plain path too
    assert implied_env(f"harbor:{DATA}") == implied_env(str(DATA)) == implied_env(str(COUNT)) == "harbor"
    assert implied_env("bash") is None and find_set(str(DATA)).env == "harbor"


def test_the_gold_writes_solution_files_and_runs_solve_sh():
    gold = {t.id: t.gold for t in load_tasks(f"harbor:{DATA}")}["greeting"]
    assert gold.startswith("mkdir -p /solution\n")
    assert "cat > '/solution/greet.sh' <<'ICPLAY_" in gold and "chmod +x '/solution/greet.sh'" in gold
    assert gold.rstrip().endswith("bash /solution/solve.sh")


def _task(tmp_path: Path, toml: str = "version = \"1.0\"\n", **files: str) -> Path:
    folder = tmp_path / "broken"
    for name, text in {"instruction.md": "Do it.", "task.toml": toml, "environment/Dockerfile": "FROM x\n",
                       "tests/test.sh": "echo 1 > /logs/verifier/reward.txt\n", **files}.items():
        if text is None:
            continue
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return folder


@pytest.mark.parametrize("change, where, says", [
    ({"instruction.md": None}, "instruction.md", "missing: a Harbor task folder needs its instruction.md"),
    ({"task.toml": "[verifier\n"}, "task.toml", "invalid TOML"),
    ({"task.toml": "[verifier]\ntimeout_sec = \"soon\"\n"}, "task.toml, field 'verifier.timeout_sec'",
     "expected a positive number"),
    ({"task.toml": "[environment]\nallow_internet = \"yes\"\n"}, "field 'environment.allow_internet'",
     "expected true or false"),
    ({"environment/Dockerfile": None, "environment/docker-compose.yaml": "services: {}\n"},
     "environment/docker-compose.yaml", "this task's environment is a docker-compose file only"),
    ({"environment/Dockerfile": None}, "environment/Dockerfile",
     "missing (and task.toml names no environment.docker_image)"),
    ({"tests/test.sh": None}, "tests/test.sh", "icplay scores a Harbor task with its own verifier"),
])
def test_a_bad_task_folder_is_one_sentence_naming_file_and_field(tmp_path, change, where, says):
    toml = change.pop("task.toml", "version = \"1.0\"\n")
    folder = _task(tmp_path, toml, **change)
    with pytest.raises(TaskFileError) as caught:
        load_tasks(f"harbor:{folder}")
    message = str(caught.value)
    assert where in message and says in message, message
    assert "\n" not in message


def test_a_compose_task_is_refused_in_one_line_by_the_cli(tmp_path):
    folder = _task(tmp_path, **{"environment/Dockerfile": None, "environment/docker-compose.yaml": "services: {}\n"})
    done = subprocess.run([sys.executable, "-m", "icplay.cli", "run", "--tasks", f"harbor:{folder}", "--policy",
                           "gold", "--out", str(tmp_path / "out")], capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert done.stderr.strip().count("\n") == 0, done.stderr
    assert "docker-compose file only" in done.stderr


def test_a_missing_folder_and_no_folder_at_all(tmp_path):
    with pytest.raises(TaskFileError, match="no such folder"):
        find_set(f"harbor:{tmp_path / 'nowhere'}")
    with pytest.raises(TaskFileError, match="--tasks harbor:PATH"):
        find_set("harbor", "harbor")   # `icplay play harbor --plain` without --tasks
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(TaskFileError, match="holds none"):
        load_tasks(f"harbor:{empty}")


@pytest.mark.parametrize("name, text, reward", [
    ("reward.txt", "1\n", 1.0), ("reward.txt", " 0.25 ", 0.25),
    ("reward.json", '{"reward": 0.5, "tests": 3}', 0.5), ("reward.json", '{"accuracy": 1}', 1.0),
])
def test_reward_files_parse(name, text, reward):
    from icplay.harbor.verify import parse_reward

    assert parse_reward(name, text.encode())[0] == reward


@pytest.mark.parametrize("name, text, says", [
    ("reward.txt", "PASS", "not a number"), ("reward.txt", "nan", "not a finite number"),
    ("reward.json", "[1]", "not an object"), ("reward.json", '{"a": 1, "b": 0}', "none named 'reward'"),
    ("reward.json", '{"reward": "yes"}', "not a number"),
])
def test_bad_reward_files_are_not_scored(name, text, says):
    from icplay.harbor.verify import NotScored, parse_reward

    with pytest.raises(NotScored, match=says):
        parse_reward(name, text.encode())


def test_per_turn_scoring_never_runs_the_verifier():
    from icplay.languages import get

    assert get("harbor").intercode_turn.plan("echo 3 > /app/answer.txt").score is False


# -- on Docker ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def harbor_ready(docker_client):
    """The hand-written tasks' base image (CI provisions it: there is no registry to pull from)."""
    from icplay.sandbox.images import image_exists

    if not image_exists(docker_client, "debian:bookworm-slim"):
        from ci_rules import unavailable

        unavailable("debian:bookworm-slim is not on this machine (ci/provision-docker.sh provides it)")


@pytest.fixture
def harbor_env(harbor_ready):
    from icplay.languages import make_env

    env = make_env("harbor")
    yield env
    env.close()


def by_id() -> dict:
    return {t.id: t for t in load_tasks(f"harbor:{DATA}")}


@pytest.mark.docker
def test_tests_and_solution_are_never_in_the_episode_and_the_gold_scores_one(harbor_env):
    tasks = by_id()
    for task in tasks.values():
        assert harbor_env.reset(task) == task.query
        seen = harbor_env.step("pwd; ls -d /tests /solution /logs/verifier 2>&1; ls -a /app")
        assert seen.observation.startswith("/app\n")
        for path in ("/tests", "/solution", "/logs/verifier"):
            assert f"ls: cannot access '{path}': No such file or directory" in seen.observation
        assert "expected.txt" not in seen.observation and "test.sh" not in seen.observation
        assert harbor_env.step(task.gold).exit_code == 0
        result = harbor_env.submit()
        assert result.reward == 1.0, result.breakdown
        assert result.strict["solved"] is False and JUDGED_IN_PLACE in result.strict["reasons"][0]
    assert result.breakdown["reward_file"] == "/logs/verifier/reward.json"   # greeting writes JSON
    assert result.breakdown["rewards"] == {"reward": 1, "executable": 1}


@pytest.mark.docker
def test_a_wrong_answer_scores_zero_and_the_episode_ends_at_its_submit(harbor_env):
    task = by_id()["count-errors"]
    harbor_env.reset(task)
    harbor_env.step("grep -ci error /app/service.log > /app/answer.txt")   # 4: counts the line of "errors"
    result = harbor_env.submit()
    assert result.reward == 0.0 and "FAIL: expected 3, got '4'" in result.breakdown["verifier_output"]
    assert result.breakdown["reward_file"] == "/logs/verifier/reward.txt"
    assert harbor_env.submit() is result                        # the verifier ran once
    with pytest.raises(RuntimeError, match="verified at its submit"):
        harbor_env.step("echo 3 > /app/answer.txt")
    harbor_env.reset(task)                                      # a new container, as at the start
    assert "No such file" in harbor_env.step("cat /app/answer.txt").observation


@pytest.mark.docker
def test_icplay_run_gold_and_a_scripted_model(harbor_ready, tmp_path, capsys, monkeypatch):
    code = main(["run", "--tasks", f"harbor:{DATA}", "--policy", "gold", "--out", str(tmp_path / "gold"),
                 "--json", "--quiet"])
    out = capsys.readouterr()
    data = json.loads(out.out)
    assert code == 0, out.err
    assert (data["episodes"], data["solved"], data["strict_solved"]) == (2, 2, 0), out.out
    saved = load_trajectory(tmp_path / "gold" / "harbor" / "count-errors.json")
    assert saved.reward == 1.0 and saved.strict["solved"] is False and saved.task["env"] == "harbor"

    monkeypatch.setenv("ICPLAY_PRICES", str(tmp_path / "none.json"))
    tasks = by_id()
    rules = {
        tasks["count-errors"].query[:40]: [fenced("grep -ciw error service.log > answer.txt", "bash"), "submit"],
        tasks["greeting"].query[:40]: [fenced("printf 'echo hi\\n' > /app/greet.sh", "bash"), "submit"],
    }
    with FakeOpenAIServer(ByTask(rules)) as server:
        code = main(["run", "harbor", "--tasks", str(DATA), "--model", "scripted", "--base-url", server.url,
                     "--turns", "3", "--protocol", "agent", "--out", str(tmp_path / "model"), "--json", "--quiet"])
        system = server.requests[0]["messages"][0]["content"]
    out = capsys.readouterr()
    data = json.loads(out.out)
    assert code == 0, out.err
    assert (data["episodes"], data["solved"]) == (2, 1), out.out
    model = {p.stem: load_trajectory(p) for p in (tmp_path / "model" / "harbor").glob("*.json")}
    assert model["count-errors"].reward == 1.0 and model["greeting"].reward == 0.0
    assert model["greeting"].breakdown["rewards"] == {"reward": 0, "executable": 0}
    assert "the task's tests then" in system


@pytest.mark.docker
def test_play_plain_to_one_and_to_zero(harbor_ready, tmp_path):
    lines = "ls /tests\necho 3 > answer.txt\nsubmit\nprintf 'echo hello\\n' > /app/greet.sh\nsubmit\n"
    done = subprocess.run([sys.executable, "-m", "icplay.cli", "play", "--tasks", f"harbor:{DATA}", "--plain",
                           "--out", str(tmp_path)], input=lines, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    out = done.stdout
    assert "icplay:/app$ ls /tests\nls: cannot access '/tests': No such file or directory" in out
    assert out.count("reward: 1.00") == 1 and out.count("reward: 0.00") == 1, out
    assert f"not strictly solved: {JUDGED_IN_PLACE}" in out
    saved = {p.stem: load_trajectory(p) for p in tmp_path.rglob("*.json") if p.parent.name == "harbor"}
    assert saved["count-errors"].reward == 1.0 and saved["greeting"].reward == 0.0
    assert [t.author for t in saved["count-errors"].turns] == ["human", "human"]


@pytest.mark.docker
def test_watch_plain_the_gold(harbor_ready, tmp_path):
    done = subprocess.run([sys.executable, "-m", "icplay.cli", "watch", "--tasks", f"harbor:{COUNT}", "--policy",
                           "gold", "--mode", "auto", "--plain", "--out", str(tmp_path)], input="",
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert "reward: 1.00" in done.stdout, done.stdout
    saved = load_trajectory(next(tmp_path.rglob("count-errors.json")))
    assert saved.reward == 1.0 and saved.turns[0].author == "agent"
    assert saved.turns[0].action.rstrip().endswith("bash /solution/solve.sh")


def test_no_test_file_leaves_the_repository_data_changed():
    """The data folder stays as committed (a test that wrote into it would leak into others)."""
    assert sorted(p.name for p in COUNT.iterdir()) == ["environment", "instruction.md", "solution", "task.toml",
                                                       "tests"]
    assert shutil.which("bash")


@pytest.mark.docker
def test_the_gymnasium_door(harbor_ready):
    import gymnasium as gym

    import icplay.gym  # noqa: F401  (registers icplay/Harbor-v0)

    env = gym.make("icplay/Harbor-v0", tasks=f"harbor:{DATA}")
    try:
        query, _info = env.reset(options={"task": "count-errors"})
        assert query.startswith("The log file /app/service.log")
        assert env.step("grep -ciw error service.log > answer.txt")[1:3] == (0.0, False)
        _obs, reward, terminated, _truncated, info = env.step("submit")
        assert (reward, terminated) == (1.0, True)
        assert info["solved"] is True and "breakdown" not in info      # how: in the trajectory, for after
        assert env.unwrapped.trajectory.breakdown["reward_file"] == "/logs/verifier/reward.txt"
    finally:
        env.close()


@pytest.mark.docker
def test_tasks_check_runs_every_oracle(harbor_ready, tmp_path, capsys):
    dataset = tmp_path / "dataset"
    shutil.copytree(DATA, dataset)
    (dataset / "greeting" / "solution" / "solve.sh").write_text("#!/bin/bash\ntrue\n")   # an oracle that does nothing
    assert main(["tasks", "--check", f"harbor:{dataset}"]) == 0
    out = capsys.readouterr().out
    assert "harbor:dataset: 1 of 2 tasks have an oracle (solution/solve.sh) that does not score 1.0" in out
    assert "greeting  reward 0 (solve.sh exit 0): runs=0 prints=0" in out


@pytest.mark.podman
def test_tasks_check_runs_the_oracles_on_podman(podman_client, tmp_path, capsys):
    """`--sandbox podman`: the oracles play in containers of Podman (the edited task's image is
    built in Podman's storage), with the same findings as on Docker."""
    import uuid

    from ci_rules import unavailable
    from icplay.harbor.image import image_tag
    from icplay.sandbox.images import image_exists

    if not image_exists(podman_client, "debian:bookworm-slim"):
        unavailable("debian:bookworm-slim is not in Podman's storage (ci/provision-docker.sh copies it there)")
    dataset = tmp_path / "dataset"
    shutil.copytree(DATA, dataset)
    (dataset / "greeting" / "solution" / "solve.sh").write_text("#!/bin/bash\ntrue\n")
    with (dataset / "greeting" / "environment" / "Dockerfile").open("a") as dockerfile:
        dockerfile.write(f"LABEL icplay.test-run={uuid.uuid4().hex}\n")    # an image of this test's own
    greeting = next(t for t in load_tasks(f"harbor:{dataset}") if t.id == "greeting")
    tag = image_tag(greeting, dataset / "greeting" / "environment")
    try:
        assert main(["tasks", "--check", f"harbor:{dataset}", "--sandbox", "podman"]) == 0
        out = capsys.readouterr().out
        assert "harbor:dataset: 1 of 2 tasks have an oracle (solution/solve.sh) that does not score 1.0" in out
        assert "greeting  reward 0 (solve.sh exit 0): runs=0 prints=0" in out
        assert image_exists(podman_client, tag)
    finally:
        if image_exists(podman_client, tag):
            podman_client.images.remove(tag, force=True)
    assert main(["tasks", "--check", f"harbor:{dataset}", "--sandbox", "mysql"]) == 2
    assert "harbor golds run on docker or podman, not 'mysql'" in capsys.readouterr().err


def test_play_harbor_without_tasks_says_which_tasks_it_needs(tmp_path):
    done = subprocess.run([sys.executable, "-m", "icplay.cli", "play", "harbor"], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "ICPLAY_HOME": str(tmp_path)})
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert done.stderr.strip() == ("icplay: harbor: no such folder: name the Harbor / Terminal-Bench task folder(s) "
                                   "with --tasks harbor:PATH")
