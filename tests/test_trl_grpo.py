"""Two GRPO steps on CPU with ``environment_factory`` set to an icplay class: a tiny
randomly initialised Qwen2 model and a tokenizer trained here (no hub download), TRL's
own Qwen3 chat template. The trainer makes the instances, resets them with the dataset
rows and scores every rollout through get_reward()."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")
trl = pytest.importorskip("trl", reason="trl is not installed (pip install 'icplay[trl]')")

from icplay.tasks.registry import load_tasks  # noqa: E402
from icplay.trl import environment_class  # noqa: E402

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>", "<think>", "</think>",
           "<tool_response>", "</tool_response>"]


def local_tokenizer():
    """A byte-level BPE tokenizer trained on a few sentences, with Qwen3's chat template."""
    from importlib.resources import files

    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    corpus = [task.query for task in load_tasks("sql")] + ["SELECT title FROM books WHERE genre = 'Poetry';",
                                                           "system user assistant tool submit run code"]
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=400, special_tokens=SPECIAL,
                                                              initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    fast.chat_template = (files("trl") / "chat_templates" / "qwen3.jinja").read_text()
    return fast


@pytest.mark.slow
def test_two_grpo_steps_on_cpu_reach_get_reward(tmp_path):
    from datasets import Dataset
    from transformers import Qwen2Config, Qwen2ForCausalLM
    from trl import GRPOConfig, GRPOTrainer

    tokenizer = local_tokenizer()
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(Qwen2Config(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64,
                                         num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
                                         max_position_embeddings=2048, tie_word_embeddings=True,
                                         pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id))
    base = environment_class("sql", sandbox="sqlite")
    calls = {"reset": 0, "get_reward": 0}

    class Counted(base):
        def reset(self, **row):
            calls["reset"] += 1
            return super().reset(**row)

        def get_reward(self) -> float:
            calls["get_reward"] += 1
            return super().get_reward()

    tasks = load_tasks("sql")[:4]
    dataset = Dataset.from_list([{"prompt": [{"role": "user", "content": "Answer with SQL."}], "task": t.id}
                                 for t in tasks])
    args = GRPOConfig(output_dir=str(tmp_path / "out"), max_steps=2, per_device_train_batch_size=2,
                      num_generations=2, max_completion_length=8, learning_rate=1e-4, logging_steps=1,
                      report_to="none", use_cpu=True, bf16=False, save_strategy="no", seed=0)
    trainer = GRPOTrainer(model=model, processing_class=tokenizer, train_dataset=dataset, args=args,
                          environment_factory=Counted)
    try:
        trainer.train()
    finally:
        base.shared.close()
    assert trainer.state.global_step == 2
    assert calls["reset"] >= 4 and calls["get_reward"] >= 4
    assert "Counted" in trainer.reward_func_names
