"""End to end: `icplay run` over the bundled sets with a scripted model on the local server.

The scripted model solves some tasks at a known turn and fails the others (wrong commands,
prose, an early submit), so the success table is known exactly; a rerun resumes without a
single model call. The gold policy must score 100% on every bundled set.
"""

import json

import pytest
from fake_openai_server import ByTask, FakeOpenAIServer, fenced

from icplay.cli import main
from icplay.report import strict_cell, summarize
from icplay.store import load_trajectory
from icplay.tasks.registry import load_tasks


def queries(set_name):
    return {t.id: t.query for t in load_tasks(set_name)}


def run_cli(capsys, *argv):
    code = main(["run", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def no_user_prices(monkeypatch, tmp_path):
    monkeypatch.setenv("ICPLAY_PRICES", str(tmp_path / "none.json"))


# The strict row's cell comes from the saved episodes (the env's verdicts: "–" where it gives
# none); tests/agents/test_agent_report.py checks how the cell is counted and written.


def table(title, label, rows):
    """The expected table: rows of (name, cell), cells right-aligned under the label."""
    left = max(len(name) for name, _ in rows)
    width = max(len(label), *(len(cell) for _, cell in rows))
    lines = [title, " " * left + f"  {label:>{width}}"]
    lines += [f"{name:<{left}}  {cell:>{width}}" for name, cell in rows]
    return "\n".join(lines)


@pytest.mark.bwrap
def test_scripted_model_on_the_bundled_bash_set(bwrap_ready, tmp_path, capsys, no_user_prices):
    q = queries("bash")
    gold = {t.id: t.gold for t in load_tasks("bash")}
    rules = {
        q["b001"]: [fenced(gold["b001"], "bash")],                                       # turn 1
        q["b002"]: [fenced("ls /testbed", "bash"), fenced(gold["b002"], "bash")],         # turn 2
        q["b003"]: ["Let me think about the log format first.", "I am still thinking.",  # two unparsable replies
                    f"Thought: count unique IPs\nAction: ```bash\n{gold['b003']}\n```"],  # turn 3
        q["b004"]: [fenced("echo hello", "bash")],                                        # never
        q["b005"]: ["submit"],                                                            # gives up at once
        q["b006"]: [f"Here you go:\n```sh\n{gold['b006']}\n```"],                         # turn 1
    }
    out = tmp_path / "run"
    with FakeOpenAIServer(ByTask(rules)) as server:
        argv = ["bash", "--tasks", "bash", "--model", "scripted", "--base-url", server.url, "--sandbox", "bwrap",
                "--turns", "3", "--limit", "6", "-j", "2", "--out", str(out), "--price", "scripted=1,2"]
        code, stdout, stderr = run_cli(capsys, *argv)
        assert code == 0, stderr
        trajs = {p.stem: load_trajectory(p) for p in (out / "bash").glob("*.json")}
        assert sorted(trajs) == ["b001", "b002", "b003", "b004", "b005", "b006"]
        usage = [t.policy["usage"] for t in trajs.values()]
        prompt = sum(u["prompt_tokens"] for u in usage)
        completion = sum(u["completion_tokens"] for u in usage)
        cost = (prompt + 2 * completion) / 1e6
        mean = sum(t.best_reward for t in trajs.values()) / 6
        label = "bash-bash-scripted-tryagain-intercode-3t"
        assert stdout.strip() == table(f"{label}  ({out})", label, [
            ("episodes", "6"),
            ("solved (InterCode)", "4 (66.7%)"),
            ("  easy", "2/3 (66.7%)"),
            ("  medium", "2/3 (66.7%)"),
            ("solved (strict)", strict_cell(summarize(trajs.values()))),
            ("mean turns", "1.67"),                     # (1 + 2 + 3 + 3 + 0 + 1) / 6
            ("mean best reward", f"{mean:.3f}"),
            ("solved by turn 1", "33.3%"),
            ("solved by turn 2", "50.0%"),
            ("solved by turn 3", "66.7%"),
            ("tokens", f"{prompt + completion:,}"),
            ("  prompt / completion", f"{prompt:,} / {completion:,}"),
            ("cost", f"${cost:.4f}"),
        ])
        assert [t.reward for t in trajs["b003"].turns] == [0.0, 0.0, 1.0]
        assert trajs["b003"].turns[0].info["invalid"] and trajs["b004"].policy["ended_by"] == "turns"
        assert trajs["b005"].turns == [] and trajs["b005"].policy["ended_by"] == "submit"
        assert sum(u["calls"] for u in usage) == len(server.requests) == 1 + 2 + 3 + 3 + 1 + 1
        assert "saving to" in stderr and "6/6" in stderr

        # a rerun resumes: nothing is replayed, the same table is printed
        calls = len(server.requests)
        code, again, _ = run_cli(capsys, *argv)
        assert code == 0 and len(server.requests) == calls
        assert again.startswith(stdout.strip()) and "6 episode(s) finished in an earlier run" in again

        # `icplay report` over the folder gives the same figures
        assert main(["report", str(out), "--json"]) == 0
        data = json.loads(capsys.readouterr().out)["runs"][0]
        assert (data["episodes"], data["solved"], data["by_turn"]) == (6, 4, [0.333333, 0.5, 0.666667])


@pytest.mark.slow
@pytest.mark.parametrize("sandbox", [pytest.param("bwrap", marks=pytest.mark.bwrap),
                                     pytest.param("docker", marks=pytest.mark.docker)])
def test_gold_scores_100_percent_on_the_bundled_bash_set(sandbox, tmp_path, capsys, request):
    request.getfixturevalue("bwrap_ready" if sandbox == "bwrap" else "bash_image")
    code, stdout, stderr = run_cli(capsys, "bash", "--tasks", "bash", "--policy", "gold", "--sandbox", sandbox,
                                   "-j", "2", "--out", str(tmp_path), "--json", "--quiet")
    data = json.loads(stdout)
    assert code == 0, stderr
    assert data["episodes"] == len(load_tasks("bash")) and data["rate"] == 1.0, stdout


def test_run_says_what_is_wrong_in_one_sentence(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    code, _, err = run_cli(capsys, "bash", "--tasks", "bash", "--sandbox", "bwrap", "--out", str(tmp_path))
    assert code == 1 and err.strip() == "icplay: say which model: --model NAME (or $ICPLAY_MODEL), or --policy gold"
    code, _, err = run_cli(capsys, "bash", "--tasks", "bash", "--model", "gpt-4o", "--sandbox", "bwrap")
    assert code == 1 and "no API key" in err and len(err.strip().splitlines()) == 1
    code, _, err = run_cli(capsys, "bash", "--tasks", "bash", "--model", "m", "--strategy", "cot",
                           "--base-url", "http://127.0.0.1:9/v1")
    assert code == 1 and "unknown strategy 'cot'" in err
    code, _, err = run_cli(capsys, "bash", "--tasks", "bash", "--policy", "replay")
    assert code == 1 and "--replay" in err


@pytest.mark.bwrap
def test_an_unreachable_server_stops_the_run_in_one_sentence(bwrap_ready, tmp_path, capsys):
    code, _, err = run_cli(capsys, "bash", "--tasks", "bash", "--model", "m", "--base-url", "http://127.0.0.1:9/v1",
                           "--sandbox", "bwrap", "--limit", "2", "--out", str(tmp_path), "--quiet")
    assert code == 1
    assert "icplay: stopped: nothing is listening at http://127.0.0.1:9/v1 (connection refused)" in err
    assert "rerun the same command" in err


def sql_rules():
    """Task i of the bundled SQL set: i % 4 == 0 solved at turn 1, 1 at turn 2, 2 at turn 3
    (after a prose reply and a wrong query), 3 never."""
    tasks = load_tasks("sql")
    qs = [t.query for t in tasks]
    assert not any(a in b for a in qs for b in qs if a is not b)      # each rule matches one task
    wrong = fenced("SELECT 'nope'")
    rules = {}
    for i, t in enumerate(tasks):
        rules[t.query] = [
            [fenced(t.gold)],
            [wrong, f"Let me fix the query.\n```SQL\n{t.gold}\n```"],
            ["I should look at the schema before writing the query.", wrong,
             f"Thought: now I know the tables.\nAction: ```sql\n{t.gold}\n```"],
            [wrong],
        ][i % 4]
    return rules


def test_scripted_model_on_the_bundled_sql_set_in_parallel_and_resumed(tmp_path, capsys, no_user_prices):
    out = tmp_path / "run"
    with FakeOpenAIServer(ByTask(sql_rules())) as server:
        argv = ["sql", "--tasks", "sql", "--model", "scripted", "--base-url", server.url, "--sandbox", "sqlite",
                "--turns", "3", "-j", "4", "--out", str(out)]
        code, _, _ = run_cli(capsys, *argv, "--limit", "20")
        assert code == 0 and len(list((out / "sql").glob("*.json"))) == 20
        first_calls = len(server.requests)
        assert first_calls == 5 * (1 + 2 + 3 + 3)

        code, stdout, stderr = run_cli(capsys, *argv)                  # the rest of the set
        assert code == 0, stderr
        assert len(server.requests) - first_calls == 6 * 9             # only the 24 new episodes
        trajs = [load_trajectory(p) for p in (out / "sql").glob("*.json")]
        assert len(trajs) == 44 and all(t.status == "submitted" for t in trajs)
        prompt = sum(t.policy["usage"]["prompt_tokens"] for t in trajs)
        completion = sum(t.policy["usage"]["completion_tokens"] for t in trajs)
        label = "sql-sql-scripted-tryagain-intercode-3t"
        expected = table(f"{label}  ({out})", label, [
            ("episodes", "44"),
            ("solved (InterCode)", "33 (75.0%)"),
            ("  easy", "9/11 (81.8%)"),
            ("  medium", "9/13 (69.2%)"),
            ("  hard", "9/12 (75.0%)"),
            ("  extra", "6/8 (75.0%)"),
            ("solved (strict)", strict_cell(summarize(trajs))),
            ("mean turns", "2.25"),
            ("mean best reward", f"{sum(t.best_reward for t in trajs) / 44:.3f}"),
            ("solved by turn 1", "25.0%"),
            ("solved by turn 2", "50.0%"),
            ("solved by turn 3", "75.0%"),
            ("tokens", f"{prompt + completion:,}"),
            ("  prompt / completion", f"{prompt:,} / {completion:,}"),
            ("cost", "unpriced"),
        ])
        assert stdout == expected + "\n(20 episode(s) finished in an earlier run were not replayed)\n"
        calls = len(server.requests)
        code, again, _ = run_cli(capsys, *argv)
        assert code == 0 and len(server.requests) == calls
        assert again.startswith(expected) and "44 episode(s) finished in an earlier run" in again


@pytest.mark.parametrize("sandbox", ["sqlite", pytest.param("mysql", marks=[pytest.mark.mysql, pytest.mark.docker])])
@pytest.mark.parametrize("protocol", ["intercode", "agent"])
def test_gold_scores_100_percent_on_the_bundled_sql_set(sandbox, protocol, tmp_path, capsys, request):
    if sandbox == "mysql":
        from icplay.sandbox.images import ensure_image

        ensure_image(request.getfixturevalue("docker_client"), "sql", lambda line: None)
    code, stdout, stderr = run_cli(capsys, "sql", "--tasks", "sql", "--policy", "gold", "--sandbox", sandbox,
                                   "--protocol", protocol, "-j", "2", "--out", str(tmp_path), "--json", "--quiet")
    data = json.loads(stdout)
    assert code == 0, stderr
    assert data["episodes"] == len(load_tasks("sql")) and data["rate"] == 1.0, stdout
