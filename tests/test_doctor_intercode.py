"""``icplay doctor`` says whether InterCode's data was found, and where; not finding it is
a note (the bundled sets need none of it), not a problem."""

from __future__ import annotations

import icplay.tasks.registry as registry
from icplay.commands import doctor


def test_doctor_notes_missing_intercode_data(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(doctor, "intercode_dir", lambda: None)
    monkeypatch.setattr(registry, "intercode_dir", lambda: None)
    monkeypatch.setenv("ICPLAY_INTERCODE", str(tmp_path / "nowhere"))
    what, ok, detail = doctor.intercode_check()
    assert (what, ok) == ("InterCode data", None)
    assert f"ICPLAY_INTERCODE={tmp_path / 'nowhere'} is not a folder" in detail
    monkeypatch.delenv("ICPLAY_INTERCODE")
    assert "ICPLAY_INTERCODE is not set" in doctor.intercode_check()[2]
    monkeypatch.setattr(doctor, "checks", lambda: [("SQLite", True, "embedded"), doctor.intercode_check()])
    assert doctor.run(None) == 0
    out = capsys.readouterr().out
    assert "--  InterCode data: not found" in out and out.rstrip().endswith("all good")


def test_doctor_says_where_intercode_data_is(monkeypatch, tmp_path):
    (tmp_path / "sql/spider").mkdir(parents=True)
    (tmp_path / "sql/spider/ic_spider_dev.json").write_text("[]")
    monkeypatch.setattr(doctor, "intercode_dir", lambda: tmp_path)
    monkeypatch.setattr(registry, "intercode_dir", lambda: tmp_path)
    what, ok, detail = doctor.intercode_check()
    assert ok is True and detail == f"found at {tmp_path} (sets: spider)"
