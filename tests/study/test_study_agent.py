"""A watch study's ``[agent]`` table: written by ``study new --agent-*``, read back, and a bad
edit refused in one sentence naming the file and the field."""

from __future__ import annotations

import pytest

from study_helpers import icplay, new_study

from icplay.study.model import StudyFileError, load_study


def test_the_agent_table_round_trips_and_bad_edits_are_named(tmp_path):
    home = tmp_path / "home"
    path = new_study(home, "--agent-model", "m-1", "--agent-base-url", "http://127.0.0.1:9/v1",
                     "--agent-protocol", "intercode")
    study = load_study("pilot", home)
    assert study.agent == {"policy": "llm", "model": "m-1", "base_url": "http://127.0.0.1:9/v1",
                           "protocol": "intercode"}
    assert load_study("pilot", home) == study          # what it writes is what it reads
    text = path.read_text()
    path.write_text(text.replace('model = "m-1"', 'modell = "m-1"'))
    with pytest.raises(StudyFileError, match=r"study.toml: field 'agent.modell' is unknown \(one of: policy, model"):
        load_study("pilot", home)
    path.write_text(text.replace('model = "m-1"', "model = 3"))
    with pytest.raises(StudyFileError, match=r"field 'agent.model' must be non-empty text, not 3"):
        load_study("pilot", home)
    path.write_text(text.replace('model = "m-1"', 'mode = "sometimes"'))
    bad = icplay("watch", "--study", "pilot", "--annotator", "ana", "--plain", home=home, check=False)
    assert bad.returncode != 0 and "field 'agent': unknown mode 'sometimes'" in bad.stderr


def test_a_study_without_an_agent_writes_no_table(tmp_path):
    home = tmp_path / "home"
    assert "[agent]" not in new_study(home).read_text() and load_study("pilot", home).agent == {}
    refused = icplay("study", "new", "x", "--tasks", "sql/bookshop-01", "--annotators", "a", "--per-task", "1",
                     "--agent-protocol", "intercode", home=home, check=False)
    assert refused.returncode != 0 and "name it with --agent-model" in refused.stderr
