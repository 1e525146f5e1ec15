"""A real OpenAI-compatible server that icplay did not write: ``transformers serve`` on CPU,
with tiny models made here (no hub download is possible or needed).

``build_models(folder)`` trains a byte-level BPE tokenizer on a few KB of text (the
``tokenizers`` library), gives it a ChatML chat template that renders tools, tool calls
and tool results (Qwen's layout, so that transformers' own response parser for the
``qwen2`` model type reads ``<tool_call>`` blocks), and saves two randomly initialised
Qwen2 models of two layers, hidden size 32:

- ``random``: the weights as initialised (seeded), its generation config suppressing the
  end-of-turn and chat-marker tokens, token 0 and the byte tokens that are not whole
  characters: garbage text that always runs to the token limit (``finish_reason: "length"``);
- ``caller``: the same weights, except that its final norm is zero, so every logit is 0
  and greedy decoding always picks token 0 — which the tokenizer holds as one
  (non-special) token for a whole ``<tool_call>`` block. Each generated token is one tool
  call: with ``max_tokens=2`` a reply holds exactly two calls of the SQL tool;
- ``stopper``: the caller with tokens 0-2 suppressed, so it says end-of-turn at once: an
  empty reply with ``finish_reason: "stop"``.

``TransformersServer`` starts ``transformers serve`` in a subprocess on a free port and
waits until ``/v1/models`` answers.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

TOOL_QUERY = "SELECT 1"
TOOL_TEXT = '<tool_call>\n{"name": "sql", "arguments": {"query": "' + TOOL_QUERY + '"}}\n</tool_call>'

# ChatML with Qwen's tool layout: tools in the system message, calls as <tool_call> blocks,
# results as <tool_response> blocks in a user turn.
CHAT_TEMPLATE = (
    "{%- if tools %}<|im_start|>system\n"
    "{%- if messages[0].role == 'system' %}{{ messages[0].content }}\n\n{% endif -%}"
    "# Tools\n<tools>\n{%- for tool in tools %}\n{{ tool | tojson }}{%- endfor %}\n</tools>\n"
    "Call a tool as <tool_call>{\"name\": ..., \"arguments\": ...}</tool_call><|im_end|>\n"
    "{%- elif messages[0].role == 'system' %}<|im_start|>system\n{{ messages[0].content }}<|im_end|>\n"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message.role == 'user' %}<|im_start|>user\n{{ message.content }}<|im_end|>\n"
    "{%- elif message.role == 'assistant' %}<|im_start|>assistant\n{{ message.content or '' }}"
    "{%- for call in message.tool_calls or [] %}\n<tool_call>\n"
    "{\"name\": \"{{ call.function.name }}\", \"arguments\": {{ call.function.arguments if call.function.arguments"
    " is string else call.function.arguments | tojson }}}\n</tool_call>{%- endfor %}<|im_end|>\n"
    "{%- elif message.role == 'tool' %}<|im_start|>user\n<tool_response>\n{{ message.content }}\n"
    "</tool_response><|im_end|>\n"
    "{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

CORPUS = """\
SELECT name FROM singer WHERE age > 30 ORDER BY name;
SELECT count(*) FROM concert GROUP BY year;
ls -la /testbed && cat README.md | head -n 20
find . -name '*.py' | xargs grep -n 'def '
def add(a, b):
    return a + b
The task is to list the files, count the rows and submit the answer when it is done.
You are an expert user working in a live database session. Reply with one query.
Output: 6 rows. Reward: 0.5. The human at the keyboard ran a command.
"""


def build_models(folder: Path) -> dict[str, Path]:
    """Save the tokenizer and the two models under ``folder``; returns {"random", "caller"} -> path."""
    import torch
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    # token 0: a whole tool call (what the "caller" model always says)
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=[TOOL_TEXT] + specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator([CORPUS] * 20, trainer)
    tok.add_tokens([AddedToken(TOOL_TEXT, special=False, normalized=False)])   # decoded like text
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=None, eos_token="<|im_end|>",
                                   pad_token="<|endoftext|>", unk_token=None)
    fast.chat_template = CHAT_TEMPLATE
    assert fast.convert_tokens_to_ids(TOOL_TEXT) == 0, "the tool call must be token 0"
    config = Qwen2Config(vocab_size=len(fast), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                         eos_token_id=fast.eos_token_id, pad_token_id=fast.pad_token_id, bos_token_id=None,
                         tie_word_embeddings=False)
    specials = [fast.convert_tokens_to_ids(t) for t in specials]
    # bytes that are not whole UTF-8 characters alone: a stream would hold them back (transformers' streamer
    # waits for the rest of the character), so the random model does not say them
    partial = [i for i in range(len(fast)) if "\ufffd" in fast.decode([i])]
    suppress = {"random": [0, *specials, *partial], "caller": [],
                "stopper": [i for i in (0, *specials) if i != fast.eos_token_id]}
    out = {}
    for name, suppressed in suppress.items():
        torch.manual_seed(0)
        model = Qwen2ForCausalLM(config)
        if name != "random":
            with torch.no_grad():
                model.model.norm.weight.zero_()     # every logit 0: greedy picks the first token not suppressed
        model.generation_config.do_sample = False
        model.generation_config.suppress_tokens = suppressed or None
        path = folder / name
        model.save_pretrained(path)
        fast.save_pretrained(path)
        out[name] = path
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve_command() -> list[str] | None:
    """How to start ``transformers serve`` from this Python (None: not installed)."""
    exe = Path(sys.executable).parent / "transformers"
    if exe.exists():
        return [str(exe), "serve"]
    return None


class TransformersServer:
    """``transformers serve`` on 127.0.0.1, CPU; ``url`` is its /v1 base."""

    def __init__(self, log: Path, timeout: float = 240.0):
        self.port = free_port()
        self.log = log
        self.timeout = timeout
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> "TransformersServer":
        command = serve_command()
        assert command is not None, "transformers serve is not installed (pip install -e '.[serve-test]')"
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
               "OMP_NUM_THREADS": "1"}
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(command + ["--host", "127.0.0.1", "--port", str(self.port), "--device", "cpu",
                                                   "--log-level", "info"],
                                         stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"transformers serve exited ({self.proc.returncode}): {self.log_text()[-2000:]}")
            try:
                with urllib.request.urlopen(self.url + "/models", timeout=2) as answer:
                    json.loads(answer.read())
                    return self
            except OSError:
                time.sleep(0.25)
        self.stop()
        raise RuntimeError(f"transformers serve did not answer within {self.timeout:g} s: {self.log_text()[-2000:]}")

    def log_text(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


if __name__ == "__main__":       # python tiny_serve.py FOLDER: build the models there (the tests do it so)
    print(json.dumps({k: str(v) for k, v in build_models(Path(sys.argv[1])).items()}))


class CuttingProxy:
    """A loopback proxy in front of a server that ends the first ``cut`` streamed replies
    cleanly after their first event (the chunked body closed, no finish reason, no
    ``[DONE]``): what a proxy or a crashed worker leaves of a stream. Later connections pass through."""

    def __init__(self, upstream_port: int, cut: int = 1):
        import threading

        self.upstream_port = upstream_port
        self.left = cut
        self.cuts = 0
        self._lock = threading.Lock()
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(16)
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def _accept(self) -> None:
        import threading

        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        import threading

        upstream = socket.create_connection(("127.0.0.1", self.upstream_port))

        def up() -> None:
            try:
                while data := client.recv(65536):
                    upstream.sendall(data)
            except OSError:
                pass

        threading.Thread(target=up, daemon=True).start()
        try:
            self._down(upstream.makefile("rb"), client)
        except OSError:
            pass
        finally:
            for sock in (client, upstream):
                try:
                    sock.close()
                except OSError:
                    pass

    def _down(self, reader, client: socket.socket) -> None:
        """Responses from upstream to the client, one after another; a streamed one may be cut."""
        while True:
            head = b""
            while not head.endswith(b"\r\n\r\n"):
                line = reader.readline()
                if not line:
                    return
                head += line
            client.sendall(head)
            if b"transfer-encoding: chunked" not in head.lower():
                length = int((re.search(rb"content-length: *(\d+)", head.lower()) or [b"", b"0"])[1])
                client.sendall(reader.read(length))
                continue
            with self._lock:
                cut = b"text/event-stream" in head.lower() and self.left > 0
                self.left -= int(cut)
                self.cuts += int(cut)
            ended = False            # the client's body ended (the rest of upstream's is read and dropped)
            while True:
                size_line = reader.readline()
                size = int(size_line.split(b";")[0].strip() or b"0", 16)
                chunk = reader.read(size + 2)
                if size == 0:
                    if not ended:
                        client.sendall(b"0\r\n\r\n")
                    break
                if not ended:
                    client.sendall(size_line + chunk)
                    ended = cut and b"data:" in chunk
                    if ended:        # the body ends cleanly here: the rest of the reply never comes
                        client.sendall(b"0\r\n\r\n")

    def stop(self) -> None:
        self._listener.close()
