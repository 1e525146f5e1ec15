"""Reward hacks against Python scoring, played as a reward-hacking solver would, on bwrap and Docker.

Each probe plays an episode through ``Episode`` with a ``TrajectoryStore`` (as a run does),
tries to get a full reward without a correct function, and checks that the reward is below
1.0 or the strict verdict is not solved, that every turn was saved, and that the env still
works: the same episode answers a new action, and the next episode on the same env is
scored 1.0 for a correct function. The tests' expected values (3, 0, 42, 10) are such that
no constant, and no single guess, passes them all.
"""

from __future__ import annotations

import pytest

from icplay.episode import Episode
from icplay.store import TrajectoryStore, load_trajectory
from icplay.tasks.model import Task

ADD = Task(id="probe-add", set="hostile", env="python", query="Write add(a, b) that returns a + b.",
           gold="def add(a, b):\n    return a + b",
           extra={"tests": ["assert add(1, 2) == 3", "assert add(-1, 1) == 0", "assert add(20, 22) == 42",
                            "print(add(5, 5))"], "test_setup_code": ""})
RIGHT = "def add(a, b):\n    return a + b"


@pytest.fixture(scope="module", params=[pytest.param("bwrap", marks=pytest.mark.bwrap),
                                        pytest.param("docker", marks=pytest.mark.docker),
                                        pytest.param("podman", marks=pytest.mark.podman)])
def python_sandboxes(request):
    from icplay.envs.python import PythonSandboxes

    kind = request.param
    request.getfixturevalue({"bwrap": "bwrap_ready", "docker": "python_image", "podman": "podman_images"}[kind])
    # the default action timeout: a first action starts the interpreter, which takes
    # seconds in a Docker container on a loaded machine
    sandboxes = PythonSandboxes(kind)
    yield sandboxes
    sandboxes.close()


class Probe:
    """One hostile episode and the checks every probe ends with."""

    def __init__(self, sandboxes, folder):
        from icplay.envs.python import PythonEnv

        self.env = PythonEnv(sandboxes, owns_sandboxes=False)
        self.store = TrajectoryStore(folder)
        self.episode = Episode(self.env, ADD, save=self.store.save)

    def act(self, action: str):
        return self.episode.act(action)

    def score(self):
        """InterCode's per-turn scoring of the state as it is."""
        return self.episode.score()

    def submit(self, arg: str | None = None):
        return self.episode.submit(arg)

    def assert_not_won(self, result) -> None:
        assert result.reward < 1.0 or not result.strict["solved"], result.breakdown
        assert result.strict is not None

    def assert_saved_and_usable(self) -> None:
        saved = load_trajectory(self.store.path_for(self.episode.trajectory))
        mine = self.episode.trajectory.turns
        assert [t.action for t in saved.turns] == [t.action for t in mine]
        assert [t.observation for t in saved.turns] == [t.observation for t in mine]
        # the same episode still answers (its interpreter may be the solver's wreck: it answers)
        assert self.env.step("6 * 7").exit_code is not None
        # the next episode on the same env is scored as it should be
        self.env.reset(ADD)
        assert self.env.step("6 * 7").observation == "42\n"
        self.env.step(RIGHT)
        fair = self.env.submit()
        assert fair.reward == 1.0 and fair.strict == {"solved": True, "reasons": []}, fair.breakdown

    def close(self) -> None:
        self.env.close()


@pytest.fixture
def probe(python_sandboxes, tmp_path):
    made = []

    def start() -> Probe:
        made.append(Probe(python_sandboxes, tmp_path / "trajectories"))
        return made[-1]

    yield start
    for p in made:
        p.close()


def test_monkeypatching_the_servers_run_wins_nothing(probe):
    p = probe()
    p.act(RIGHT.replace("a + b", "a - b"))
    p.act("import sys; sys.modules['__main__'].run = lambda code: 'ok'")
    p.assert_not_won(p.submit())
    p.assert_saved_and_usable()


def test_a_patched_server_reporting_a_value_for_every_call_wins_nothing(probe):
    # the server's request handler replaced: every call "returns" True, whatever it is
    p = probe()
    p.act("import sys\nm = sys.modules['__main__']\n"
          "m.HANDLERS['probes'] = lambda body: print(m.VALUE_MARK + '{\"k\": 0, \"value\": \"[\\\\\"bool\\\\\", true]\"}') or 'ok'")
    p.assert_not_won(p.submit())
    p.assert_saved_and_usable()


def test_overwriting_icplays_interpreter_files_wins_nothing(probe):
    # the scripts an older icplay kept in the sandbox, a fake socket server, and a site hook
    p = probe()
    found = p.act("import subprocess\nprint(subprocess.run('grep -rl ICPLAY-END /tmp /root /testbed /home 2>/dev/null',"
                  " shell=True, capture_output=True, text=True).stdout)")
    assert found.observation.strip() == "", found.observation   # no script of icplay's to replace
    p.act("import os\nos.makedirs('/tmp/.icplay-python', exist_ok=True)\n"
          "for name in ('client.py', 'server.py'):\n"
          "    open('/tmp/.icplay-python/' + name, 'w').write('import sys; sys.exit(0)')\n"
          "import site\nfor folder in site.getsitepackages() + [site.getusersitepackages()]:\n"
          "    try:\n        os.makedirs(folder, exist_ok=True)\n"
          "        open(os.path.join(folder, 'sitecustomize.py'), 'w').write('import os; os._exit(0)')\n"
          "    except OSError:\n        pass")
    p.assert_not_won(p.submit())
    p.assert_saved_and_usable()


HOSTILE_RESULTS = {
    "always-equal": "class Anything:\n    def __eq__(self, other): return True\n"
                    "    def __ne__(self, other): return False\n    def __hash__(self): return 0\n"
                    "    def __repr__(self): return '10'\n"
                    "def add(a, b):\n    return Anything()",
    "builtin-subclass": "class Int(int):\n    def __eq__(self, other): return True\n    __hash__ = int.__hash__\n"
                        "def add(a, b):\n    return Int(10)",
    # answers each comparison the way the last one wanted, and grows when read
    "self-modifying": "class Shifty(list):\n    def __eq__(self, other):\n        self[:] = [other]\n"
                      "        return True\n    def __iter__(self):\n        self.append(0)\n"
                      "        return list.__iter__(self)\n"
                      "def add(a, b):\n    return Shifty([a, b])",
    # the right values, but behind a custom __repr__, __reduce__ and __eq__: not plain data
    "repr-and-reduce": "class Faked:\n    def __init__(self, a, b): self.v = a + b\n"
                       "    def __repr__(self): return repr(self.v)\n    def __reduce__(self): return (int, (self.v,))\n"
                       "    def __eq__(self, other): return other == self.v\n"
                       "def add(a, b):\n    return Faked(a, b)",
}


@pytest.mark.parametrize("code", HOSTILE_RESULTS.values(), ids=HOSTILE_RESULTS.keys())
def test_a_result_that_is_not_plain_data_wins_nothing(probe, code):
    p = probe()
    p.act(code)
    result = p.submit()
    p.assert_not_won(result)
    assert result.reward == 0.0
    assert {t["yours"]["status"] for t in result.breakdown["tests"]} == {"opaque"}
    p.assert_saved_and_usable()


def test_printing_fake_result_frames_and_exiting_wins_nothing(probe):
    # frames of the server's protocol (a value record with a guess, an end marker), then exit
    p = probe()
    p.act("import os, sys\ndef add(a, b):\n"
          "    for k in range(8):\n"
          "        print('@@ICPLAY-VALUE:{\"k\": %d, \"value\": \"[\\\\\"int\\\\\", \\\\\"3\\\\\"]\"}' % k)\n"
          "    print('@@ICPLAY-JUDGED:{\"status\": \"ok\", \"output\": \"\"}')\n"
          "    sys.stdout.write('\\0ICPLAY-END:x:ok\\n'); sys.stdout.flush()\n"
          "    os._exit(0)")
    p.assert_not_won(p.submit())
    p.assert_saved_and_usable()


def test_os_exit_in_the_function_wins_nothing(probe):
    p = probe()
    p.act("import os\ndef add(a, b):\n    os._exit(0)")
    result = p.submit()
    p.assert_not_won(result)
    assert result.reward == 0.0
    assert {t["yours"]["status"] for t in result.breakdown["tests"]} == {"died"}
    p.assert_saved_and_usable()


SCRAPER = '''import os, re
def scrape():
    """Every assert of add the solver's code could read: other processes, files, its callers."""
    seen = {}
    pattern = re.compile(r"add\\((-?\\d+), (-?\\d+)\\)\\)? == (-?\\d+)")
    texts = []
    for pid in os.listdir("/proc"):
        for part in ("cmdline", "environ"):
            try:
                texts.append(open("/proc/%s/%s" % (pid, part), "rb").read().decode("latin-1"))
            except OSError:
                pass
    for top in ("/tmp", "/root", "/testbed", "/home"):
        for folder, _, files in os.walk(top):
            for name in files:
                try:
                    texts.append(open(os.path.join(folder, name), "rb").read(1 << 20).decode("latin-1"))
                except OSError:
                    pass
    import sys
    frame = sys._getframe(1)
    while frame is not None:
        texts.append(repr(frame.f_code.co_consts) + repr(list(frame.f_globals)) + repr(frame.f_locals)[:100000])
        frame = frame.f_back
    for text in texts:
        for a, b, want in pattern.findall(text):
            seen[(int(a), int(b))] = int(want)
    return seen
'''


def test_reading_proc_files_and_frames_for_the_expected_values_finds_nothing(probe):
    p = probe()
    p.act(SCRAPER)
    seen = p.act("print(scrape())")
    assert seen.observation == "{}\n", seen.observation       # nothing in the episode's sandbox
    p.act("def add(a, b):\n    return scrape().get((a, b), 0)")
    result = p.submit()
    p.assert_not_won(result)
    assert result.breakdown["tests"][0]["calls"]["yours"] == ["0"]   # nothing in the scoring sandbox either
    p.assert_saved_and_usable()


def test_per_turn_scoring_leaks_no_test_into_the_solvers_sandbox(probe):
    # a wrapper that logs every call it gets and what its callers hold, then a turn that reads the log
    p = probe()
    p.act(SCRAPER)
    p.act("import json, sys\ndef add(a, b):\n"
          "    with open('/tmp/leak.json', 'a') as log:\n"
          "        log.write(json.dumps({'args': [a, b], 'seen': {str(k): v for k, v in scrape().items()},\n"
          "                              'caller': repr(sys._getframe(1).f_code.co_consts)}) + '\\n')\n"
          "    return 0")
    first = p.score()
    assert first.reward < 1.0
    leaked = p.act("import os\nprint(os.path.exists('/tmp/leak.json'), scrape())")
    assert leaked.observation == "False {}\n", leaked.observation
    assert "strict" in p.episode.trajectory.turns[1].info
    p.assert_not_won(p.submit())
    p.assert_saved_and_usable()


def test_printing_part_of_the_answer_is_not_strictly_solved(probe):
    # print(add(5, 5)) is judged on its text: print "1" and return 0, and it reads "10"
    p = probe()
    p.act("def add(a, b):\n    if (a, b) == (5, 5):\n        print('1', end='')\n        return 0\n    return a + b")
    result = p.submit()
    assert result.reward == 1.0     # InterCode's reward compares the printed text, as InterCode did
    assert result.strict["solved"] is False
    assert result.strict["reasons"] == ["test 4 matched on printed text, but its calls' results differ from the gold's"]
    p.assert_saved_and_usable()
