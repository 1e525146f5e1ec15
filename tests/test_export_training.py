"""Exports a trainer can trust, checked with TRL's own dataset utilities and one SFT and one
DPO step on CPU (a tiny random Qwen2 and a tokenizer trained here, as tests/test_trl_grpo.py
builds them; no hub): chat records keep what was done (submit with its argument, weights,
metadata), preference pairs come from branches' outcomes, steps carry human labels."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from branching_helpers import edit, reject, watched_episode
from icplay.episode import HUMAN, Trajectory, Turn, label_turn
from icplay.formats.export import chat_record
from icplay.languages import make_env
from icplay.review.branch import Branching, branch
from icplay.store import save_trajectory
from icplay.tasks.registry import load_tasks

SQL_TASK = next(t for t in load_tasks("sql") if t.id == "bookshop-01")


def cli(*args, home):
    return subprocess.run([sys.executable, "-m", "icplay.cli", *args], capture_output=True, text=True, timeout=300,
                          env={"ICPLAY_HOME": str(home), "PATH": "/usr/bin:/bin"})


def submitted(env, task, breakdown, actions="text", reward=1.0):
    """A submitted episode of ``env`` whose breakdown holds submit's argument."""
    turn = Turn(index=0, author="agent", action="print(1)" if env == "python" else "cat note.txt", observation="1",
                info={"tool_call": {"id": "c1", "name": "run"}} if actions == "tools" else {})
    return Trajectory(task={"set": env, "id": task.id, "env": env, "query": task.query}, env=env, sandbox="docker",
                      policy={"kind": "llm", "model": "m1", "protocol": "agent", "actions": actions,
                              "ended_by": "submit"},
                      turns=[turn], status="submitted", reward=reward, breakdown=breakdown,
                      strict={"solved": reward == 1.0, "reasons": []})


@pytest.mark.parametrize("env,key,arg,tool_arg", [("python", "function", "square", "function_name"),
                                                  ("ctf", "submitted", "icplay{flag}", "flag")])
def test_chat_ends_with_the_submit_the_model_had_to_write(env, key, arg, tool_arg):
    task = load_tasks(env)[0]
    record = chat_record(submitted(env, task, {key: arg}))
    assert record["messages"][-1] == {"role": "assistant", "content": f"submit {arg}", "weight": 1}
    tools = chat_record(submitted(env, task, {key: arg}, actions="tools"))
    call = tools["messages"][-1]["tool_calls"][0]["function"]
    assert call["name"] == "submit" and json.loads(call["arguments"]) == {tool_arg: arg}
    meta = record["metadata"]
    assert meta["task"] == {"set": env, "id": task.id, "env": env} and meta["model"] == "m1"
    assert meta["reward"] == 1.0 and meta["strict"] == {"solved": True, "reasons": []}
    assert meta["message_authors"][-1] == "agent"


def test_sql_submit_stays_bare():
    record = chat_record(submitted("sql", SQL_TASK, {"rows": 3}))
    assert record["messages"][-1]["content"] == "submit"


@pytest.fixture
def watched(tmp_path):
    """A watched SQL episode (an edit, a rejection, solved), labelled, and its two branches at
    the edited turn (the human's edit hurt: the agent's proposal was right)."""
    folder = tmp_path / "episodes"
    folder.mkdir()
    solved = watched_episode(SQL_TASK, "sqlite", ["SELECT count(*) FROM books", "DELETE FROM books", SQL_TASK.gold,
                                                  None],
                             [edit("SELECT genre FROM books", "look first"), reject("never delete")],
                             folder / "solved.json")
    label_turn(solved.turns[0], "good", "looking first is right", "ann", when=1.0)
    label_turn(solved.turns[2], "good", None, "ann", when=2.0)
    save_trajectory(solved, folder / "solved.json")
    hurt = watched_episode(SQL_TASK, "sqlite", ["SELECT genre FROM books", SQL_TASK.gold, None],
                           [None, edit("SELECT 1")], folder / "hurt.json")
    label_turn(hurt.turns[1], "bad", "the edit threw the answer away", "ann")
    save_trajectory(hurt, folder / "hurt.json")
    branch(hurt, 1, 0, Branching(lambda: make_env("sql", sandbox="sqlite"), tmp_path / "branches"))
    return tmp_path, solved, hurt


def exported(tmp_path, fmt, *paths, extra=()):
    out = tmp_path / f"{fmt}.jsonl"
    done = cli("export", fmt, *map(str, paths), "--out", str(out), *extra, home=tmp_path / "home")
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in out.read_text().splitlines()], done.stderr


def test_chat_export_keeps_what_was_done_and_says_which_episodes(watched):
    tmp_path, solved, hurt = watched
    records, said = exported(tmp_path, "chat", tmp_path / "episodes")
    assert "solved episodes only" in said and "1 chat record(s) from 1 of 2 episodes" in said
    (record,) = records
    messages = record["messages"]
    assistant = [m for m in messages if m["role"] == "assistant"]
    assert [m["weight"] for m in assistant] == [1, 0, 1, 1]       # edit, rejected proposal, human's query, submit
    assert "DELETE FROM books" in assistant[1]["content"]
    assert "rejected this query" in messages[messages.index(assistant[1]) + 1]["content"]
    meta = record["metadata"]
    assert meta["episode"] == solved.id and meta["annotator"] == "ann" and meta["solved"] is True
    assert [a for a in meta["message_authors"] if a] == ["agent-edited-by-human", "rejected", "agent", "agent"]
    assert len(meta["message_authors"]) == len(messages)
    everything, said = exported(tmp_path, "chat", tmp_path / "episodes", extra=("--solved", "any", "--no-rejected"))
    assert "as asked" in said and len(everything) == 2
    assert all(m.get("weight") == 1 for r in everything for m in r["messages"] if m["role"] == "assistant")


def test_steps_export_is_labelled_turns_with_the_outcome(watched):
    tmp_path, solved, hurt = watched
    records, _ = exported(tmp_path, "steps", tmp_path / "episodes")
    by_episode = {r["metadata"]["episode"]: r for r in records}
    good = by_episode[solved.id]
    assert good["labels"] == [True, True] and good["label_sources"] == ["human", "human"]   # the rejection ran nothing
    assert good["step_labels"] == ["good", "good"] and good["notes"] == ["looking first is right", None]
    assert good["turns"] == [0, 2]
    assert good["label_authors"][0] == "ann" and good["outcome"]["solved"] is True
    bad = by_episode[hurt.id]
    assert bad["labels"] == [False, False] and bad["label_sources"] == ["outcome", "human"]
    assert "SELECT 1" in bad["completions"][-1] and isinstance(bad["prompt"], str)


def test_a_hostile_label_is_no_label():
    turn = Turn(index=0, author=HUMAN, action="ls", observation="", info={"label": {"label": "<script>"}})
    assert turn.label is None
    turn.info["label"] = "good"
    assert turn.label is None
    with pytest.raises(ValueError):
        label_turn(turn, "excellent")


# --- TRL ----------------------------------------------------------------------------------------

torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")
pytest.importorskip("trl", reason="trl is not installed (pip install 'icplay[trl]')")


def tiny_model(tokenizer):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    return Qwen2ForCausalLM(Qwen2Config(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64,
                                        num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
                                        max_position_embeddings=4096, tie_word_embeddings=True,
                                        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id))


def test_trl_dataset_utilities_accept_every_record(watched):
    from test_trl_grpo import local_tokenizer
    from trl.data_utils import apply_chat_template, is_conversational, maybe_apply_chat_template

    tmp_path, _, _ = watched
    tokenizer = local_tokenizer()
    chats, _ = exported(tmp_path, "chat", tmp_path / "episodes")
    pairs, _ = exported(tmp_path, "preference", tmp_path / "branches")
    steps, _ = exported(tmp_path, "steps", tmp_path / "episodes")
    assert chats and pairs and steps
    for record in chats:
        assert is_conversational(record)
        text = apply_chat_template(record, tokenizer)["text"]
        assert "submit" in text and "SELECT" in text
    for pair in pairs:
        assert is_conversational(pair)
        done = apply_chat_template(pair, tokenizer)
        assert set(done) >= {"prompt", "chosen", "rejected"} and "SELECT 1" in done["rejected"]
    for record in steps:
        assert not is_conversational(record)       # stepwise supervision is TRL's standard (text) shape
        assert maybe_apply_chat_template(record, tokenizer)["completions"] == record["completions"]
        assert len(record["completions"]) == len(record["labels"]) and all(type(x) is bool for x in record["labels"])


@pytest.mark.slow
def test_one_sft_and_one_dpo_step_on_the_exported_files(watched):
    from datasets import Dataset
    from test_trl_grpo import local_tokenizer
    from trl import DPOConfig, DPOTrainer, SFTConfig, SFTTrainer

    tmp_path, _, _ = watched
    tokenizer = local_tokenizer()
    chats, _ = exported(tmp_path, "chat", tmp_path / "episodes", extra=("--solved", "any"))
    pairs, _ = exported(tmp_path, "preference", tmp_path / "branches")
    common = dict(max_steps=1, per_device_train_batch_size=2, learning_rate=1e-4, report_to="none", use_cpu=True,
                  bf16=False, save_strategy="no", seed=0, max_length=2048)
    sft = SFTTrainer(model=tiny_model(tokenizer), processing_class=tokenizer,
                     train_dataset=Dataset.from_list([{"messages": r["messages"]} for r in chats]),
                     args=SFTConfig(output_dir=str(tmp_path / "sft"), **common))
    sft.train()
    assert sft.state.global_step == 1
    rows = [{k: p[k] for k in ("prompt", "chosen", "rejected")} for p in pairs]
    dpo = DPOTrainer(model=tiny_model(tokenizer), ref_model=tiny_model(tokenizer), processing_class=tokenizer,
                     train_dataset=Dataset.from_list(rows * 2),
                     args=DPOConfig(output_dir=str(tmp_path / "dpo"), **common))
    dpo.train()
    assert dpo.state.global_step == 1
