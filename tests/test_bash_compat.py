"""``--compat intercode``: InterCode's execution semantics, on its NL2Bash image.

The pure parts (docker-py's split of InterCode's ``bash -c "ACTION"`` string, its ``cd``
emulation, its status parse) are checked against their definitions; the rest runs in
real containers of ``intercode-nl2bash-fs1`` (built from ../shared when missing).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from icplay.bash.compat import clean_cmd, exec_argv, parse_status, simplify_path
from icplay.languages import make_env
from icplay.tasks.model import Task


@pytest.mark.parametrize("action, argv", [
    ('echo "a b"', ["/bin/bash", "-c", "echo a", "b"]),                 # inner quotes end -c's argument
    ("echo $1 $(echo sub)", ["/bin/bash", "-c", "echo $1 $(echo sub)"]),
    ("echo a\\tb", ["/bin/bash", "-c", "echo a\\tb"]),                   # kept inside the quotes: bash eats it
    ('echo -e "a\\tb"', ["/bin/bash", "-c", "echo -e atb"]),             # outside them: shlex eats it
    ("grep -r 'x y' .", ["/bin/bash", "-c", "grep -r 'x y' ."]),          # single quotes survive
    ("echo \\\\", ["/bin/bash", "-c", "echo \\"]),
])
def test_docker_py_splits_intercodes_command_string(action, argv):
    assert exec_argv(clean_cmd(action)) == argv


def test_an_unbalanced_quote_cannot_be_split():
    with pytest.raises(ValueError):
        exec_argv(clean_cmd('echo "unbalanced'))


@pytest.mark.parametrize("current, arg, expected", [
    ("/", "testbed", "/testbed"), ("/testbed", "../etc/./x", "/etc/x"), ("/testbed", "/a/b/..", "/a"),
    ("/", "..", "/"), ("/x", "", "/x"), ("/", "/testbed && ls", "/testbed && ls"),
])
def test_cd_emulation(current, arg, expected):
    assert simplify_path(current, arg) == expected


def test_status_is_parsed_by_whitespace_pairs():
    # a path with a space splits into two tokens, as in InterCode
    assert parse_status(" M a.txt\n?? new dir/\n") == [("M", "a.txt"), ("??", "new")]


# -- in containers ---------------------------------------------------------------------------




def _task(gold: str, name: str = "t") -> Task:
    return Task(id=name, env="bash", set="compat", query="q", gold=gold)


@pytest.mark.docker
@pytest.mark.shared
def test_actions_run_as_intercode_runs_them(nl2bash_image):
    env = make_env("bash", sandbox="docker", image=nl2bash_image, compat="intercode")
    try:
        env.reset(_task("true"))
        seen = {action: env.step(action).observation for action in
                ['echo "a b"', "echo $1 $(echo sub)", "echo a\\tb", 'echo -e "a\\tb"', 'echo "unbalanced',
                 "export X=1", "echo [$X]", "cd /testbed/dir1", "pwd", "cd ..", "pwd"]}
        assert seen['echo "a b"'] == "a\n"
        assert seen["echo $1 $(echo sub)"] == "sub\n"
        assert seen["echo a\\tb"] == "atb\n" and seen['echo -e "a\\tb"'] == "atb\n"
        assert seen['echo "unbalanced'] == "Malformed command"
        assert seen["echo [$X]"] == "[]\n"           # nothing but the directory persists
        assert seen["pwd"] == "/testbed\n"
        # the same actions in icplay's shell run as written
        default = make_env("bash", sandbox="docker", image=nl2bash_image)
        try:
            default.reset(_task("true"))
            assert default.step('echo "a b"').observation == "a b\n"
            assert default.step('echo -e "a\\tb"').observation == "a\tb\n"
        finally:
            default.close()
    finally:
        env.close()


@pytest.mark.docker
@pytest.mark.shared
def test_compat_containers_are_on_dockers_default_network_as_intercodes_are(nl2bash_image):
    """InterCode's containers had Docker's default network: a lookup gets the host resolver's
    answer there (gpt-4's `dig +short` printed nothing where the gold printed nothing, 1.0),
    where a container without a network prints "network unreachable". icplay's own mode
    keeps its sandbox off the network."""
    interfaces = "ls /sys/class/net | sort"
    compat = make_env("bash", sandbox="docker", image=nl2bash_image, compat="intercode")
    default = make_env("bash", sandbox="docker", image=nl2bash_image)
    try:
        compat.reset(_task("true"))
        assert compat.step(interfaces).observation.split() == ["eth0", "lo"]
        default.reset(_task("true"))
        assert default.step(interfaces).observation.split() == ["lo"]
    finally:
        compat.close()
        default.close()


@pytest.mark.docker
@pytest.mark.shared
def test_reset_deletes_the_images_empty_directories(nl2bash_image):
    listing = "find /testbed -empty -type d | sort"
    default = make_env("bash", sandbox="docker", image=nl2bash_image)
    compat = make_env("bash", sandbox="docker", image=nl2bash_image, compat="intercode")
    try:
        default.reset(_task(listing))
        before = default.step(listing).observation.split()
        assert "/testbed/dir1/subdir2" in before     # empty in the image
        compat.reset(_task(listing))
        assert compat.step("ls -d /tmp").exit_code != 0  # /tmp too: empty, untracked, not ignored
        after = compat.step(listing).observation.split()
        assert after == []                              # git clean -fd removed them
        result = compat.submit()                        # the gold ran in a container reset alike
        assert result.reward == 1.0 and result.gold_output == ""
    finally:
        default.close()
        compat.close()


@pytest.mark.docker
@pytest.mark.shared
@pytest.mark.parametrize("reuse", [True, False])
def test_reused_containers_carry_what_git_leaves_to_the_next_episode(nl2bash_image, reuse):
    """InterCode ran a file system's episodes in one agent and one eval container reset by
    git only: a file's time an episode (or a gold) set survives the reset, as ages did in
    the recordings (fs1 episode 11 gzipped the files episode 12's `find -mtime +7` looks
    for; git restored them new). A fresh pair per episode starts from the image."""
    touch = "touch -d 2000-01-01 /testbed/hello.c"
    year = "stat -c %y /testbed/hello.c | cut -c1-4"
    env = make_env("bash", sandbox="docker", image=nl2bash_image, compat="intercode", reuse_containers=reuse)
    try:
        env.reset(_task(touch, "first"))
        env.step(touch)
        first = env.submit()
        agent, evaluation = env.agent.container.id, env.eval.container.id
        assert first.reward == 1.0
        env.reset(_task(year, "second"))
        seen = env.step(year).observation
        second = env.submit()
        if reuse:
            assert (env.agent.container.id, env.eval.container.id) == (agent, evaluation)
            assert seen == "2000\n" and second.gold_output == "2000\n"
        else:
            assert env.agent.container.id != agent and env.eval.container.id != evaluation
            assert seen != "2000\n" and second.gold_output == seen
        assert second.reward == 1.0
    finally:
        env.close()
    assert env.agent is None and env.eval is None


@pytest.mark.docker
@pytest.mark.shared
def test_rescore_replays_bash_episodes_in_both_modes(nl2bash_image, tmp_path):
    """Recorded rewards made with the compat env itself replay identically in compat mode;
    in icplay's mode the quoting turn's observation differs."""
    task = {"query": "say hello", "gold": 'echo "hello world"'}
    tasks = tmp_path / "tasks.json"
    tasks.write_text(json.dumps([task]))
    actions = ['echo "hello world"', "echo hello world"]
    env = make_env("bash", sandbox="docker", image=nl2bash_image, compat="intercode")
    try:
        env.reset(_task(task["gold"]))
        observations, rewards = [], []
        for action in actions:
            observations.append(env.step(action).observation)
            rewards.append(env.submit().reward)
    finally:
        env.close()
    assert observations == ["hello\n", "hello world\n"] and rewards[0] == 1.0 and rewards[1] < 1.0
    results = tmp_path / "results.json"
    results.write_text(json.dumps({"0": {"environment": "ic_bash", "task_id": 0, "turn_history": {
        "actions": actions, "observations": observations, "rewards": rewards}}}))
    lines = {}
    modes = {"compat": ["--compat", "intercode", "--jobs", "2"], "default": [],
             "compat-fresh": ["--compat", "intercode", "--fresh-containers"]}
    for mode, options in modes.items():
        out = tmp_path / f"{mode}.jsonl"
        argv = [sys.executable, "-m", "icplay.cli", "rescore", str(results), "--tasks", str(tasks), "--env", "bash",
                "--image", nl2bash_image, "--out", str(out)] + options
        done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        # one container pair for the file, in order, as InterCode ran it: --jobs cannot apply
        assert ("--jobs is ignored" in done.stderr) == (mode == "compat")
        lines[mode] = done.stdout
        turns = [json.loads(line) for line in out.read_text().splitlines()]
        assert [t["turn"] for t in turns] == [0, 1]
        if mode.startswith("compat"):
            assert [t["agrees"] for t in turns] == [True, True]
            assert [t["observation_agrees"] for t in turns] == [True, True]
        else:
            assert turns[0]["observation"] == "hello world\n" and turns[0]["observation_agrees"] is False
    for mode in ("compat", "compat-fresh"):
        assert "turns agreeing within 0.01: 2 / 2" in lines[mode]
        assert "episodes whose solved status agrees: 1 / 1" in lines[mode]


def test_rescore_of_bash_without_an_image_says_so(tmp_path):
    tasks = tmp_path / "tasks.json"
    tasks.write_text(json.dumps([{"query": "q", "gold": "true"}]))
    results = tmp_path / "results.json"
    results.write_text(json.dumps({"0": {"task_id": 0, "turn_history": {"actions": ["ls"], "rewards": [1.0]}}}))
    done = subprocess.run([sys.executable, "-m", "icplay.cli", "rescore", str(results), "--tasks", str(tasks),
                           "--env", "bash"], capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "--image" in done.stderr and "Traceback" not in done.stderr
