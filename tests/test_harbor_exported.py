"""Harbor tasks out and back in (issue 23): `icplay export harbor` writes one task of each
bundled language's set, and those folders load as Harbor tasks and play on real Docker —
the gold (the export's solution/solve.sh) to 1.0, strictly solved (their verifier runs in a
fresh container: Harbor's separate mode), an empty answer below 1.0. The answer
conventions are files a shell agent writes (/app/answer.txt, answer.sql, solution.py,
flag.txt), so every language plays in the harbor shell."""

from __future__ import annotations

from pathlib import Path

import pytest

from icplay.tasks.registry import load_tasks

pytestmark = [pytest.mark.docker, pytest.mark.slow]
LANGUAGES = ("bash", "sql", "python", "ctf")
# an answer that is no answer, per language (the file the export's instruction asks for)
EMPTY = {"bash": "echo nothing > /app/answer.txt", "sql": "echo 'SELECT 1;' > /app/answer.sql",
         "python": "echo 'x = 1' > /app/solution.py", "ctf": "echo 'icplay{nope}' > /app/flag.txt"}


@pytest.fixture(scope="module")
def exported(docker_client, tmp_path_factory) -> Path:
    """The first task of each bundled set, written as Harbor task folders (their images FROM
    icplay's, built first)."""
    from icplay.harbor.export import export_tasks
    from icplay.languages import get
    from icplay.sandbox.images import ensure_image

    for language in LANGUAGES:
        for image in get(language).images:
            ensure_image(docker_client, image.key, lambda line: None)
    out = tmp_path_factory.mktemp("exported")
    written = export_tasks([load_tasks(language)[0] for language in LANGUAGES], out)
    assert len(written.written) == len(LANGUAGES) and not written.skipped, written.skipped
    return out


@pytest.fixture(scope="module")
def harbor_env():
    from icplay.languages import make_env

    env = make_env("harbor")
    yield env
    env.close()


def test_exported_folders_load_as_harbor_tasks(exported):
    tasks = load_tasks(f"harbor:{exported}")
    assert sorted(t.id.split("-", 1)[0] for t in tasks) == sorted(LANGUAGES)
    for task in tasks:
        settings = task.extra["harbor"]
        assert settings["verifier_mode"] == "separate" and "/app" in settings["artifacts"], settings
        assert task.gold.rstrip().endswith("bash /solution/solve.sh")


@pytest.mark.parametrize("language", LANGUAGES)
def test_the_exported_gold_plays_to_one_strictly(exported, harbor_env, language):
    task = next(t for t in load_tasks(f"harbor:{exported}") if t.id.startswith(f"{language}-"))
    harbor_env.reset(task)
    assert "cannot access '/tests'" in harbor_env.step("ls /tests /solution").observation
    harbor_env.step(task.gold)
    result = harbor_env.submit()
    assert result.reward == 1.0, result.breakdown
    assert result.strict == {"solved": True, "reasons": []}
    assert result.breakdown["verifier_mode"] == "separate" and "/app" in result.breakdown["artifacts"]

    harbor_env.reset(task)
    harbor_env.step(EMPTY[language])
    wrong = harbor_env.submit()
    assert wrong.reward < 1.0 and wrong.strict["solved"] is False, wrong.breakdown
