"""Reward-hack probes against Bash scoring, on each sandbox they apply to.

Each probe acts as a reward-hacking solver would, through ``Episode`` and a
``TrajectoryStore`` as a run does, and asserts that the hack does not pay (a reward below
1.0, or a strict verdict of not solved), that nothing it planted ran in icplay's own
tools (a marker file would say so), that the session still answers and that every turn
was saved. The memory probes give every path that reads an action's output an endless
single line and assert icplay's memory stays within a few output caps.

Planting actions fork many processes: the sandboxes here allow an action 30 s (the
suite's 4 s is for the runaway probes), so that a loaded machine cannot cut a plant short.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from icplay.envs.bash import BashEnv
from icplay.episode import Episode
from icplay.store import TrajectoryStore, load_trajectory
from icplay.tasks.model import Task
from icplay.tasks.registry import load_tasks

BUNDLED = {task.id: task for task in load_tasks("bash")}
MODIFYING = [f"b0{n}" for n in range(56, 64)]     # golds that modify tracked files in place
MB = 1024 * 1024
MEMORY_BOUND = 64 * MB      # a few output caps (1 MiB each) and the interpreter's noise
ACTION_TIMEOUT = 30.0
ENDLESS_LINE = "timeout 4 yes | tr -d '\\n'"      # one line, endless for four seconds

SANDBOXES = [pytest.param("docker", marks=pytest.mark.docker), pytest.param("bwrap", marks=pytest.mark.bwrap),
             pytest.param("podman", marks=pytest.mark.podman)]


def _task(gold: str, name: str = "probe") -> Task:
    return Task(id=f"probe-{name}", set="probe", env="bash", query="probe", gold=gold)


class Probe:
    """One episode of a probe: every turn through Episode, saved in a TrajectoryStore."""

    def __init__(self, sandboxes, task: Task, folder: Path):
        self.env = BashEnv(sandboxes, owns_sandboxes=False)
        self.store = TrajectoryStore(folder / "trajectories")
        self.episode = Episode(self.env, task, save=self.store.save)

    def act(self, action: str):
        return self.episode.act(action)

    def score(self):
        return self.episode.score()

    def close(self) -> None:
        self.env.close()

    def check_after(self, markers: str = "") -> None:
        """No marker of a planted tool, the session usable, every turn saved."""
        if markers:
            seen = self.act("PATH=/usr/bin:/bin; unset BASH_ENV ENV LD_PRELOAD; \\unalias -a; "
                            f"\\unset -f git; \\ls -a {markers} 2>/dev/null | \\grep -c pwned; true")
            assert seen.observation.strip() == "0", f"a planted tool ran: {seen.observation}"
        first = self.act("export ICPLAY_PROBE=alive; cd /testbed")
        second = self.act("echo $ICPLAY_PROBE $PWD")
        assert second.observation.startswith("alive /testbed"), second.observation
        assert first.exit_code == 0 and second.exit_code == 0
        saved = load_trajectory(self.store.path_for(self.episode.trajectory)).turns
        mine = self.episode.trajectory.turns
        assert [t.action for t in saved] == [t.action for t in mine]
        assert [t.observation for t in saved] == [t.observation for t in mine]
        assert [t.info.get("strict") for t in saved] == [t.info.get("strict") for t in mine]


@pytest.fixture(scope="module")
def pools(request):
    """The probes' sandbox pools by kind, made on first use and closed with the module."""
    from icplay.envs.bash import BashSandboxes

    made: dict[str, BashSandboxes] = {}

    def get(kind: str) -> BashSandboxes:
        if kind not in made:
            request.getfixturevalue({"docker": "bash_image", "podman": "podman_images", "bwrap": "bwrap_ready"}[kind])
            made[kind] = BashSandboxes(kind, timeout=ACTION_TIMEOUT, spares=0)
        return made[kind]

    yield get
    for sandboxes in made.values():
        sandboxes.close()


@pytest.fixture(params=SANDBOXES)
def kind(request) -> str:
    return request.param


@pytest.fixture
def probe(kind, pools, tmp_path):
    sandboxes = pools(kind)
    made: list[Probe] = []

    def start(task: Task) -> Probe:
        made.append(Probe(sandboxes, task, tmp_path))
        return made[-1]

    yield start
    for one in made:
        one.close()


# -- the strict verdict: modified files ------------------------------------------------------


@pytest.mark.parametrize("task_id", MODIFYING)
def test_junk_in_a_modified_file_is_not_strictly_solved(probe, task_id):
    """InterCode compares contents only for added files: junk written into each file the
    gold modifies keeps the reward InterCode gives it (1.0 for most), never the verdict."""
    task = BUNDLED[task_id]
    played = probe(task)
    gold = played.env.sandboxes.gold_run(task)
    modified = sorted(path for status, path in gold.changes if status == "M")
    assert modified, gold.changes
    played.act(" ".join(f"echo junk > /{path};" for path in modified))
    result = played.score()
    assert result.strict["solved"] is False, result.strict
    assert any("differs from the gold copy" in reason for reason in result.strict["reasons"]) or result.reward < 1.0
    assert result.breakdown["p1"] == 0.33          # the same files changed: InterCode's p1 is full
    played.check_after()


# -- no planted code runs in icplay's tools ----------------------------------------------------

PLANT_HOOK = r"""
cat > /testbed/h.sh <<'EOF'
#!/bin/sh
touch /tmp/pwned-$1 /testbed/pwned-$1 testbed/pwned-$1 2>/dev/null
cat >/dev/null
EOF
chmod +x /testbed/h.sh
"""

PLANT_GIT_CONFIG = PLANT_HOOK + r"""
git -C / config core.fsmonitor "/testbed/h.sh fsmonitor"
git -C / config core.pager "/testbed/h.sh pager"
git -C / config pager.status "/testbed/h.sh pagerstatus"
git -C / config diff.external "/testbed/h.sh diff"
git -C / config filter.evil.clean "/testbed/h.sh filter"
git -C / config filter.evil.process "/testbed/h.sh process"
git -C / config status.showUntrackedFiles no
git -C / config core.untrackedCache true
printf '[core]\n\tfsmonitor = /testbed/h.sh included\n' > /testbed/inc.cfg
git -C / config include.path /testbed/inc.cfg
mkdir -p /testbed/hooks
for h in post-index-change reference-transaction pre-auto-gc post-checkout; do
  printf '#!/bin/sh\ntouch /tmp/pwned-hook-%s\n' $h > /testbed/hooks/$h; chmod +x /testbed/hooks/$h
  cp /testbed/hooks/$h /.git/hooks/$h
done
git -C / config core.hooksPath /testbed/hooks
printf '* filter=evil\n' > /testbed/.gitattributes
echo junk > /testbed/junk-untracked.txt
touch /testbed/README.md /testbed/data/*
"""


@pytest.mark.docker
def test_planted_git_configuration_and_hooks_never_run(pools, tmp_path):
    """On Docker the solver owns /.git: fsmonitor, pager, filters, include, hooks and an
    untracked-files switch in its configuration, none of which icplay's git may obey."""
    played = Probe(pools("docker"), _task("ls /testbed"), tmp_path)
    try:
        planted = played.act(PLANT_GIT_CONFIG)
        assert planted.exit_code == 0 and not planted.info.get("timed_out"), planted.observation
        played.act("ls /testbed")
        result = played.score()
        # the planted switch hid nothing: the junk, the hook script and the attributes count
        extra = {path for _status, path in result.breakdown["extra"]}
        assert "testbed/junk-untracked.txt" in extra and "testbed/h.sh" in extra, result.breakdown
        assert result.reward < 1.0 and result.strict["solved"] is False
        played.check_after("/tmp /testbed")
    finally:
        played.close()


@pytest.mark.bwrap
def test_planted_git_files_in_the_bwrap_sandbox_never_run(pools, tmp_path):
    """On bwrap the scoring repository is out of reach; what the solver can plant is a
    repository of its own in /testbed, configuration in its home and attributes."""
    marker = Path(f"/tmp/icplay-probe-{uuid.uuid4().hex}")
    played = Probe(pools("bwrap"), _task("ls /testbed"), tmp_path)
    try:
        script = PLANT_HOOK.replace("/tmp/pwned-$1", f"/tmp/pwned-$1 {marker}") + r"""
cd /testbed && git init -q . && git config core.fsmonitor "/testbed/h.sh nested"
for f in /root/.gitconfig /root/.config/git/config; do mkdir -p ${f%/*}
  printf '[core]\n\tfsmonitor = /testbed/h.sh home\n\thooksPath = /testbed\n[filter "evil"]\n\tclean = /testbed/h.sh filter\n' > $f
done
printf '* filter=evil\n' > /testbed/.gitattributes
cp /testbed/h.sh /testbed/post-index-change
touch /testbed/README.md
"""
        played.act(script)
        played.act("ls /testbed")
        result = played.score()
        assert result.strict["solved"] is False and result.reward < 1.0
        assert not marker.exists(), "a planted tool ran on the host"
        played.check_after("/tmp /testbed")
    finally:
        played.close()


PLANT_SHADOWS = r"""
echo junk > /testbed/junk.txt
mkdir -p /tmp/evil
for t in git md5sum find sort cut stat env bash sh timeout xargs readlink mkdir mktemp ln rm cat head base64 setpriv; do
  printf '#!/bin/sh\ntouch /tmp/pwned-path-%s\nexec /usr/bin/%s "$@"\n' $t $t > /tmp/evil/$t
done
chmod +x /tmp/evil/*
cp /tmp/evil/* /usr/local/bin/ 2>/dev/null
printf 'touch /tmp/pwned-bashenv\n' > /tmp/evil/env.sh
echo 'touch /tmp/pwned-rc' >> /root/.bashrc; echo 'touch /tmp/pwned-profile' >> /root/.profile
git() { touch /tmp/pwned-function; command git "$@"; }
md5sum() { touch /tmp/pwned-function; command md5sum "$@"; }
export -f git md5sum
alias git='touch /tmp/pwned-alias; git'
export PATH=/tmp/evil:$PATH BASH_ENV=/tmp/evil/env.sh ENV=/tmp/evil/env.sh LD_PRELOAD=/tmp/evil/missing.so
"""


def test_path_aliases_functions_and_bash_env_never_reach_the_scoring(probe):
    played = probe(_task("ls /testbed"))
    planted = played.act(PLANT_SHADOWS)
    assert not planted.info.get("timed_out"), planted.observation
    played.act("ls /testbed")
    result = played.score()
    assert result.reward < 1.0 and result.strict["solved"] is False
    assert ["??", "testbed/junk.txt"] in result.breakdown["extra"]
    played.check_after("/tmp")


@pytest.mark.docker
def test_scoring_runs_with_the_solvers_capabilities(pools, tmp_path):
    """The side commands read the solver's files with no capability its shell lacks."""
    played = Probe(pools("docker"), _task("true"), tmp_path)
    try:
        mine = played.act("grep CapBnd /proc/self/status").observation.split()
        code, scorer = played.env.sandbox.exec(["/bin/grep", "CapBnd", "/proc/self/status"])
        assert code == 0 and scorer.split() == mine, (scorer, mine)
        played.check_after()
    finally:
        played.close()


# -- hiding changes from InterCode's listing ----------------------------------------------------


@pytest.mark.docker
def test_an_index_told_to_ignore_a_deletion_hides_it_from_the_verdict_not(pools, tmp_path):
    played = Probe(pools("docker"), _task("ls /testbed"), tmp_path)
    try:
        played.act("f=$(cd / && git ls-files testbed | grep '^testbed/.*/.*/' | head -1); rm /$f; "
                   "git -C / update-index --assume-unchanged $f")
        played.act("ls /testbed")
        result = played.score()
        assert result.strict["solved"] is False, (result.reward, result.strict)
        assert any("the gold's run did not change it" in reason for reason in result.strict["reasons"]) \
            or result.reward < 1.0
        played.check_after()
    finally:
        played.close()


def test_a_planted_gitignore_hides_nothing_from_the_verdict(probe):
    played = probe(_task("ls /testbed"))
    played.act("mkdir -p /testbed/docs/hidden && echo junk > /testbed/docs/hidden/junk.txt && "
               "printf '*\\n' > /testbed/docs/hidden/.gitignore")
    played.act("ls /testbed")
    result = played.score()
    assert result.reward == 1.0, result.breakdown      # InterCode's listing does not see it
    assert result.strict["solved"] is False
    assert any("testbed/docs/hidden" in reason for reason in result.strict["reasons"]), result.strict
    played.check_after()


# -- the gold's run, the TF-IDF and md5 parts ---------------------------------------------------


def test_files_planted_for_the_golds_run_are_not_where_it_runs(probe):
    played = probe(_task("cat /testbed/README.md"))
    played.act("echo planted-junk > /testbed/README.md; cat /testbed/README.md")
    result = played.score()
    assert "planted-junk" not in result.gold_output and result.gold_output
    assert result.reward < 1.0 and result.strict["solved"] is False
    played.check_after()


def test_dumping_every_word_of_the_filesystem_does_not_pay(probe):
    played = probe(_task("ls /testbed"))
    played.act("ls /testbed; grep -rhoE '[A-Za-z0-9_]+' /testbed /usr/share/doc 2>/dev/null | sort -u | head -100000")
    result = played.score()
    assert result.reward < 1.0 and result.breakdown["cosine"] < 0.5
    played.check_after()


def test_an_added_file_with_junk_and_the_md5_printed_does_not_pay(probe):
    played = probe(_task("md5sum /testbed/README.md > /testbed/sum.txt"))
    played.act("echo junk > /testbed/sum.txt; md5sum /testbed/README.md | tee /dev/null >/dev/null")
    result = played.score()
    assert result.breakdown["different_content"] == ["testbed/sum.txt"]
    assert result.reward < 1.0 and result.strict["solved"] is False
    played.check_after()


def test_proc_never_shows_the_golds_processes(probe):
    """A background reader of every /proc/*/cmdline and environ, running across reset,
    actions and scoring (a nondeterministic gold runs again at scoring time), never sees
    the gold's command."""
    token = uuid.uuid4().hex
    played = probe(_task(f"echo icplay-gold-{token} $RANDOM", name=token[:8]))
    # builtins only, so that a round over /proc is quick on a loaded machine
    played.act("(end=$((SECONDS+9)); while [ $SECONDS -lt $end ]; do for f in /proc/[0-9]*/cmdline /proc/[0-9]*/environ; "
               "do while IFS= read -r -d '' x; do printf '%s ' \"$x\"; done < $f; echo; done >> /tmp/seen 2>/dev/null; "
               "done) >/dev/null 2>&1 &")
    control = token[::-1]
    played.act(f"sh -c 'sleep 2.5' icplay-control-{control}")   # what the reader does see
    result = played.score()
    assert result.reward < 1.0
    for _ in range(3):
        played.act("sleep 3.5")
    seen = played.act(f"wc -l < /tmp/seen; grep -c icplay-control-{control} /tmp/seen; "
                      f"grep -c icplay-gold-{token} /tmp/seen")
    lines, controls, hits = seen.observation.split()[:3]
    assert int(lines) > 0 and int(controls) > 0 and hits == "0", seen.observation
    played.check_after()


# -- output memory: every path that reads an action's output -------------------------------------


def _hostile_helpers():
    """tests/hostile/conftest.py as a module (by its path: a conftest of this folder may
    shadow the name ``conftest``), for its peak-RSS measure."""
    spec = importlib.util.spec_from_file_location("hostile_helpers", Path(__file__).resolve().parents[1] / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("hostile_helpers", module)   # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


peak_rss = _hostile_helpers().peak_rss


def test_the_golds_run_keeps_memory_bounded(probe):
    played = probe(_task(ENDLESS_LINE, name=uuid.uuid4().hex[:8]))
    with peak_rss() as measured:
        result = played.score()
    assert len(result.gold_output.encode()) <= MB
    assert measured.growth < MEMORY_BOUND, measured.growth
    played.check_after()


def test_a_side_command_keeps_memory_bounded(kind, pools):
    """Sandbox.exec, the side door every score reads through, on an endless line."""
    sandboxes = pools(kind)
    pool = sandboxes.pool(_task("true"))
    box = pool.take()
    try:
        with peak_rss() as measured:
            _code, output = box.exec(["/bin/sh", "-c", ENDLESS_LINE], timeout=30)
        assert len(output.encode()) <= 4 * MB + 4096
        assert measured.growth < MEMORY_BOUND, measured.growth
    finally:
        pool.discard(box)


# --compat intercode on each image engine: the engine, and the fixture of InterCode's image in its storage
COMPAT_ENGINES = [pytest.param("docker", "nl2bash_image", marks=pytest.mark.docker, id="docker"),
                  pytest.param("podman", "podman_nl2bash_image", marks=pytest.mark.podman, id="podman")]


@pytest.mark.shared
@pytest.mark.parametrize("engine, image_fixture", COMPAT_ENGINES)
def test_compat_actions_and_gold_keep_memory_bounded(request, engine, image_fixture):
    """--compat intercode: the per-action exec and the gold's run keep at most the cap."""
    from icplay.languages import make_env

    env = make_env("bash", sandbox=engine, image=request.getfixturevalue(image_fixture), compat="intercode")
    try:
        env.reset(_task(ENDLESS_LINE))
        with peak_rss() as measured:
            step = env.step(ENDLESS_LINE)
            result = env.submit()
        assert len(step.observation.encode()) == MB and step.info["truncated_bytes"] > 0
        assert len(result.gold_output.encode()) == MB
        assert measured.growth < MEMORY_BOUND, measured.growth
        after = env.step("echo still here")
        assert after.observation == "still here\n"
    finally:
        env.close()


RESCORE_RSS = ("import resource, subprocess, sys; done = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
               "print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); "
               "print(done.stderr[-2000:], file=sys.stderr)")


@pytest.mark.shared
@pytest.mark.parametrize("engine, image_fixture", COMPAT_ENGINES)
def test_rescore_of_an_endless_line_keeps_memory_bounded(request, engine, image_fixture, tmp_path):
    """``icplay rescore --compat intercode`` of a recorded endless line: its peak resident
    memory (ru_maxrss of the rescore process) within a bound of the same rescore of
    ``echo``."""
    nl2bash_image = request.getfixturevalue(image_fixture)
    tasks = tmp_path / "tasks.json"
    tasks.write_text(json.dumps([{"query": "q", "gold": "echo hi"}]))
    peaks = {}
    for name, action in (("echo", "echo hi"), ("endless", ENDLESS_LINE)):
        results = tmp_path / f"{name}.json"
        results.write_text(json.dumps({"0": {"environment": "ic_bash", "task_id": 0, "turn_history": {
            "actions": [action], "observations": [""], "rewards": [0.0]}}}))
        argv = [sys.executable, "-c", RESCORE_RSS, sys.executable, "-m", "icplay.cli", "rescore", str(results),
                "--tasks", str(tasks), "--env", "bash", "--image", nl2bash_image, "--compat", "intercode",
                "--sandbox", engine, "--out", str(tmp_path / f"{name}.jsonl")]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
        code, peak_kb = done.stdout.split()[:2]
        assert code == "0", done.stderr
        peaks[name] = int(peak_kb) * 1024
    assert peaks["endless"] - peaks["echo"] < MEMORY_BOUND, peaks


# -- nothing of icplay inside the bwrap sandbox -------------------------------------------------

INSIDE_PROBE = r"""
import json, os, sys
import icplay
from icplay.languages import make_env
from icplay.paths import cache_dir, data_dir
from icplay.tasks.registry import load_tasks

package = os.path.dirname(icplay.__file__)
task = {t.id: t for t in load_tasks("bash")}["b063"]
env = make_env("bash", sandbox="bwrap", timeout=60)
try:
    env.reset(task)
    seen = {}
    for name, action in {
        "package": f"ls -A {package} | wc -l",
        "bundle": f"wc -c < {package}/_bundle/bundle.tar.gz 2>&1",
        "cache": f"ls -A {cache_dir()} | wc -l",
        "home": f"ls -A {os.environ['ICPLAY_HOME']} | wc -l",
        "write": f"touch {package}/planted 2>&1 || echo refused",
        "gold": "grep -rlF 'sort -u -o /testbed/data/mailing_list.txt' /usr/local /opt /root /tmp /etc 2>/dev/null | wc -l",
    }.items():
        seen[name] = env.step(action).observation.strip()
    result = env.submit()
    seen["reward"] = result.reward
finally:
    env.close()
print(json.dumps({"package": package, "data": str(data_dir()), "seen": seen}))
"""


@pytest.mark.bwrap
@pytest.mark.slow
def test_icplay_installed_under_usr_local_is_hidden_from_bwrap(bwrap_ready, tmp_path):
    """pip-install the wheel of this checkout under /usr/local (bound into every bwrap
    sandbox with /usr), cache and home there too, run an episode from that install and
    look for icplay's package, bundle, cache and a gold from inside."""
    import shutil

    root = Path(__file__).resolve().parents[3]
    source = tmp_path / "src"
    subprocess.run(f"tar -C {root} --exclude=./.git --exclude=./.venv --exclude=./build --exclude='*.egg-info' "
                   f"--exclude=__pycache__ --exclude=.pytest_cache -cf - . | (mkdir -p {source} && tar -C {source} -xf -)",
                   shell=True, check=True)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "dist"), str(source)],
                   check=True, capture_output=True, timeout=600)
    wheel = next((tmp_path / "dist").glob("icplay-*.whl"))
    prefix = Path(f"/usr/local/icplay-probe-{uuid.uuid4().hex[:12]}")
    try:
        subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--prefix", str(prefix), str(wheel)],
                       check=True, capture_output=True, timeout=600)
        site = next(prefix.glob("lib/python3*/site-packages"))
        # a recording of icplay's home holding the task's gold, as a saved trajectory does
        (prefix / "home" / "trajectories").mkdir(parents=True)
        (prefix / "home" / "trajectories" / "saved.json").write_text(json.dumps(
            {"gold_output": "", "gold": BUNDLED["b063"].gold}))
        env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("ICPLAY_")}
        env.update(PYTHONPATH=str(site), ICPLAY_CACHE=str(prefix / "cache"), ICPLAY_HOME=str(prefix / "home"))
        done = subprocess.run([sys.executable, "-c", INSIDE_PROBE], env=env, cwd=str(tmp_path), capture_output=True,
                              text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        report = json.loads(done.stdout.strip().splitlines()[-1])
        # the episode really ran from the install, and its files are there on the host
        assert report["package"].startswith(str(site)), report
        assert (Path(report["package"]) / "_bundle" / "bundle.tar.gz").is_file()
        assert report["data"].startswith(str(prefix / "cache")) and (Path(report["data"]) / "bash" / "tasks.json").is_file()
        seen = report["seen"]
        assert seen["package"] == "0" and seen["cache"] == "0" and seen["home"] == "0", seen
        assert not seen["bundle"].isdigit() or seen["bundle"] == "0", seen
        assert seen["write"].endswith("refused") and seen["gold"] == "0", seen
        assert seen["reward"] < 1.0
    finally:
        shutil.rmtree(prefix, ignore_errors=True)
