"""The InterCode drop-in: a script written for InterCode's API (reset(i), step(gold),
step("submit")) scores 1.0 on icplay through ``icplay.compat.intercode``."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Dict, List

import pytest

from icplay.compat.intercode import ACTION_EXEC, AGENT_OBS, EVAL_OBS, REWARD, BashEnv, CTFEnv, PythonEnv, SqlEnv
from icplay.paths import data_dir


def preprocess_sql(record: Dict) -> str:  # InterCode's experiments pass this one
    return f"use {record['db']}"


def intercode_script(env) -> list[tuple[int, float]]:
    """What InterCode's gold-check scripts do; returns the tasks not scoring 1.0."""
    missed = []
    for index in range(len(env.data_loader)):
        env.reset(index)
        assert env.query == env.data_loader.get(index)["query"]
        observation, reward, done, info = env.step(env.gold)
        assert (reward, done) == (0, False) and info[ACTION_EXEC] is True
        observation, reward, done, info = env.step("submit")
        assert done
        if reward != 1.0:
            missed.append((index, reward))
    return missed


def test_bundled_sql_set_scores_one():
    env = SqlEnv("docker-env-sql", data_path=str(data_dir() / "sql/tasks.json"), preprocess=preprocess_sql,
                 verbose=False)
    try:
        assert len(env.data_loader) > 10
        assert intercode_script(env) == []
    finally:
        env.close()


@pytest.mark.shared
@pytest.mark.slow
def test_spider_scores_one(shared_intercode: Path):
    env = SqlEnv("docker-env-sql", data_path=str(shared_intercode / "sql/spider/ic_spider_dev.json"),
                 preprocess=preprocess_sql)
    try:
        assert len(env.data_loader) == 1034
        assert intercode_script(env) == []
    finally:
        env.close()


@pytest.mark.shared
def test_spider_databases_found_beside_the_task_file_as_from_a_wheel(shared_intercode: Path, tmp_path, monkeypatch):
    """Installed from a wheel there is no ../shared and no $ICPLAY_INTERCODE: InterCode's
    layout (the dump beside the task file) is enough; without the dump the error says what
    fixes it."""
    import icplay.tasks.registry as registry
    from icplay.sql.base import SqlBackendError

    monkeypatch.setattr(registry, "intercode_dir", lambda: None)   # as a wheel install sees it
    copy = tmp_path / "copy"
    copy.mkdir()
    spider = shared_intercode / "sql/spider"
    (copy / "ic_spider_dev.json").symlink_to(spider / "ic_spider_dev.json")
    (copy / "ic_spider_dbs.sql").symlink_to(spider / "ic_spider_dbs.sql")
    env = SqlEnv("docker-env-sql", data_path=str(copy / "ic_spider_dev.json"), preprocess=preprocess_sql)
    try:
        env.reset(0)
        env.step(env.gold)
        assert env.step("submit")[1] == 1.0
    finally:
        env.close()
    (copy / "ic_spider_dbs.sql").unlink()
    env = SqlEnv("docker-env-sql", data_path=str(copy / "ic_spider_dev.json"), preprocess=preprocess_sql)
    try:
        with pytest.raises(SqlBackendError, match="ICPLAY_INTERCODE.*databases=PATH"):
            env.reset(0)
    finally:
        env.close()


def test_sql_observations_are_intercodes():
    env = SqlEnv("docker-env-sql", data_path=str(data_dir() / "sql/tasks.json"), preprocess=preprocess_sql)
    try:
        observation, info = env.reset(0)
        assert observation is None and info[ACTION_EXEC]   # "use db" returns no result set, as in InterCode
        observation, reward, done, info = env.step("SELECT 1, 'a'")
        assert observation == [(1, "a")] and env.observation == observation
        observation, _, _, info = env.step("SELEC nonsense")
        assert observation.startswith("Error executing query: ") and info[ACTION_EXEC] is False
        assert env.trajectory[0] == ("SELECT 1, 'a'", [(1, "a")])
        observation, reward, done, info = env.step("submit")
        assert done and reward == 0.0 and info["reward"] == 0.0 and EVAL_OBS not in info
        assert env.loop.trajectory.gold_output   # the gold's output is kept for after the episode
        assert env.get_available_actions() is None
    finally:
        env.close()


def test_bad_input_says_what_is_wrong(tmp_path):
    with pytest.raises(OSError, match="Invalid file path"):
        SqlEnv("docker-env-sql", data_path=str(tmp_path / "nope.json"))
    bad = tmp_path / "bad.json"
    bad.write_text('[{"query": "q"}]')
    with pytest.raises(ValueError, match="'gold' and 'query'"):
        SqlEnv("docker-env-sql", data_path=str(bad))
    env = SqlEnv("docker-env-sql", data_path=str(data_dir() / "sql/tasks.json"))
    with pytest.raises(IndexError, match="out of range"):
        env.reset(10_000)
    env.close()


@pytest.mark.bwrap
def test_bash_golds_score_one_on_bwrap(bwrap_ready, tmp_path):
    env = BashEnv("intercode-bash", data_path=str(data_dir() / "bash/tasks.json"), sandbox="bwrap",
                  traj_dir=str(tmp_path))
    try:
        for index in (0, 5, 40):
            env.reset(index)
            observation, reward, done, info = env.step(env.gold)
            assert isinstance(observation, str) and not done
            observation, reward, done, info = env.step("submit")
            assert (reward, done) == (1.0, True), info
        env.reset(1)
        observation, *_ = env.step("echo wrong")
        assert observation == "wrong\n"
        assert env.step("submit")[1] < 1.0
    finally:
        env.close()
    assert len(list(tmp_path.rglob("*.json"))) == 4


# -- Python (MBPP) ---------------------------------------------------------------------

def gold_function(record: Dict) -> str:
    """The gold's function the tests call (InterCode's own scripts took the first ``def``)."""
    names = re.findall(r"^def\s+(\w+)\s*\(", record["gold"].replace("\r\n", "\n"), re.M)
    tests = "\n".join(record["tests"])
    return next((name for name in names if re.search(rf"\b{name}\s*\(", tests)), names[-1])


def python_script(env, indices) -> list[tuple[int, float]]:
    """InterCode-Python's gold check: reset(i), step(gold), step("submit NAME")."""
    missed = []
    for index in indices:
        env.reset(index)
        record = env.data_loader.get(index)
        observation, reward, done, info = env.step(env.gold)
        assert (reward, done) == (0, False) and set(observation) == {"output", "error"}
        assert info[ACTION_EXEC] is True, (index, observation)
        observation, reward, done, info = env.step(f"submit {gold_function(record)}")
        assert done and info[ACTION_EXEC] and info[REWARD] == reward
        assert EVAL_OBS not in info and not any(test in json.dumps(info) for test in record["tests"])   # hidden
        if reward != 1.0:
            missed.append((index, reward))
    return missed


@pytest.fixture(params=[pytest.param("docker", marks=pytest.mark.docker),
                        pytest.param("bwrap", marks=pytest.mark.bwrap)])
def python_sandbox(request) -> str:
    request.getfixturevalue("python_image" if request.param == "docker" else "bwrap_ready")
    return request.param


def test_bundled_python_set_scores_one(python_sandbox):
    """Every task on bwrap; every third on Docker (a new container per episode: ten minutes
    for all 42 on this loaded machine, and the Docker path is the same for each)."""
    env = PythonEnv("intercode-python", data_path=str(data_dir() / "python/tasks.json"), sandbox=python_sandbox)
    try:
        assert len(env.data_loader) >= 40
        step = 3 if python_sandbox == "docker" else 1
        assert python_script(env, range(0, len(env.data_loader), step)) == []
    finally:
        env.close()


def mbpp_sample(env) -> list[int]:
    """Every 20th MBPP task, and every one whose gold InterCode read differently: a helper
    defined before the tested function (40), or ``def name (`` that InterCode's
    ``def (\\w+)\\(`` missed (6). All 974 take an hour under load; the sample a few minutes."""
    picked = []
    for index in range(len(env.data_loader)):
        record = env.data_loader.get(index)
        first = re.search(r"def (\w+)\(", record["gold"])
        if index % 20 == 0 or first is None or first.group(1) != gold_function(record):
            picked.append(index)
    return picked


@pytest.mark.shared
@pytest.mark.bwrap
@pytest.mark.slow
def test_mbpp_scores_one(shared_intercode: Path, bwrap_ready):
    env = PythonEnv("intercode-python", data_path=str(shared_intercode / "python/mbpp/ic_mbpp.json"),
                    sandbox="bwrap", is_agent=True)
    try:
        assert len(env.data_loader) == 974
        sample = mbpp_sample(env)
        assert len(sample) == 91   # 49 by stride, 42 more of the 46 read differently
        assert python_script(env, sample) == []
    finally:
        env.close()


@pytest.mark.bwrap
def test_python_observations_are_intercodes(bwrap_ready):
    env = PythonEnv("intercode-python", data_path=str(data_dir() / "python/tasks.json"), sandbox="bwrap")
    try:
        observation, info = env.reset(0)
        assert observation == env.query and info == {}
        assert env.step("x = 6 * 7") == ({"output": "", "error": ""}, 0, False, {ACTION_EXEC: True})
        assert env.step("print(x)")[0] == {"output": "42", "error": ""}
        observation, _, _, info = env.step("print('before'); 1 / 0")
        assert observation == {"output": "before", "error": "ZeroDivisionError: division by zero"}
        assert info[ACTION_EXEC] is False
        assert env.trajectory[1] == ("print(x)", {"output": "42", "error": ""})
        env.step("def square(n):\n    return n + n")     # wrong on purpose
        observation, reward, done, info = env.step("submit square")
        assert done and 0.0 < reward < 1.0 and info["submitted_function"] == "square"
        assert "assert square" not in json.dumps(info) and EVAL_OBS not in info    # the tests stay hidden
        rows = env.loop.trajectory.breakdown["tests"]                                # kept for after
        assert rows[0]["test"] == "assert square(3) == 9" and rows[0]["yours"]["status"] != "ok"
        assert env.trajectory[-1] == ("submit square", None)
        env.reset(0)
        assert env.step("print(x)")[0]["error"] == "NameError: name 'x' is not defined"   # pristine
        assert env.step("skip") == ("skipped", 0, True, {})
    finally:
        env.close()


# -- CTF ---------------------------------------------------------------------------------

def preprocess_ctf(record: Dict) -> List:   # InterCode's experiments pass this one
    cmds = [f"cd /ctf/{record['task_id']}"]
    if "setup" in record:
        cmds.append(record["setup"])
    return cmds


@pytest.fixture(params=[pytest.param("docker", marks=pytest.mark.docker),
                        pytest.param("bwrap", marks=pytest.mark.bwrap)])
def ctf_sandbox(request) -> str:
    if request.param == "docker":
        from icplay.languages import get
        from icplay.sandbox.images import ensure_image

        get("ctf")   # its spec registers the image
        ensure_image(request.getfixturevalue("docker_client"), "ctf", lambda line: None)
    else:
        request.getfixturevalue("bwrap_ready")
    return request.param


def ctf_script(env, solve) -> list[tuple[int, float]]:
    """reset(i), step(the solution), step("submit <the flag it printed>")."""
    missed = []
    for index, command in solve.items():
        env.reset(index)
        observation, reward, done, info = env.step(command)
        assert (reward, done) == (0, False) and info[ACTION_EXEC] is True, (index, observation)
        flag = observation.strip().splitlines()[-1]
        observation, reward, done, info = env.step(f"submit {flag}")
        assert done and info[AGENT_OBS] == flag and info[REWARD] == reward
        if reward != 1.0:
            missed.append((index, reward))
    return missed


def test_bundled_ctf_set_scores_one(ctf_sandbox):
    # timeout: caesar-shift's solution starts 26 interpreters, which can take longer than
    # InterCode's 10 s per action on this loaded 2-core machine (it was killed once)
    env = CTFEnv("intercode-ctf", data_path=str(data_dir() / "ctf/tasks.json"), sandbox=ctf_sandbox, timeout=60)
    try:
        solutions = data_dir() / "ctf" / "solutions"
        solve = {i: (solutions / f"{env.data_loader.get(i)['id']}.sh").read_text()
                 for i in range(len(env.data_loader))}
        assert len(solve) >= 15
        assert ctf_script(env, solve) == []
        env.reset(0)
        assert env.step("submit icplay{not the flag}")[1] == 0
    finally:
        env.close()


@pytest.mark.shared
def test_intercode_ctf_offline_tasks_score_one(shared_intercode: Path, ctf_sandbox):
    env = CTFEnv("intercode-ctf", data_path=str(shared_intercode / "ctf/ic_ctf.json"), sandbox=ctf_sandbox,
                 preprocess=preprocess_ctf)
    try:
        assert len(env.data_loader) == 100
        solve = {4: "cat flag",                                          # in the clear
                 5: "echo 'cvpbPGS{abg_gbb_onq_bs_n_ceboyrz}' | tr 'A-Za-z' 'N-ZA-Mn-za-m'",   # ROT13
                 21: "strings strings | grep -o 'picoCTF{[^}]*}'"}
        assert ctf_script(env, solve) == []
        # the shell is in the task's folder, which holds its files and no solution notes
        env.reset(0)
        observation, *_ = env.step("pwd; ls -A")
        assert observation.split() == ["/ctf/0", "unpackme.flag.py"]
        # task 14's setup (git clone binwalk) runs neither at reset nor as preprocess: no network
        observation, info = env.reset(14)
        assert info[ACTION_EXEC] is True and env.step("ls")[0].split() == ["dolls.jpg"]
        # InterCode compared the first word after submit; icplay the whole rest of the line
        env.reset(4)
        assert env.step("submit picoCTF{s4n1ty_v3r1f13d_2fd6ed29} extra")[1] == 0
    finally:
        env.close()
