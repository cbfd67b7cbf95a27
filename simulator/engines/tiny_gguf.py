"""Write a tiny Llama GGUF with random f16 weights and the locally trained tokenizer,
for llama.cpp's llama-server. Run with the gguf venv's python (numpy, tokenizers, gguf):

    python tiny_gguf.py OUT.gguf

Sizes match `tiny_model.py` (hidden 256, 2 layers), so both engines do similar work.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

if __package__ in (None, ""):   # run as a script from the engine venv
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from simulator.engines.tiny_tokenizer import train_tokenizer

# ChatML, string or list-of-parts content, assistant tool calls (llama.cpp's jinja engine)
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{ '<|im_start|>' + message['role'] + '\\n' }}"
    "{%- if message['content'] is string -%}{{ message['content'] }}"
    "{%- elif message['content'] -%}{%- for part in message['content'] -%}"
    "{%- if part['type'] == 'text' -%}{{ part['text'] }}{%- endif -%}"
    "{%- endfor -%}{%- endif -%}"
    "{%- if message['tool_calls'] -%}{%- for tc in message['tool_calls'] -%}"
    "{{ '\\n<tool_call>\\n{\"name\": \"' + tc['function']['name'] + '\", \"arguments\": ' }}"
    "{{ tc['function']['arguments'] | tojson }}{{ '}\\n</tool_call>' }}"
    "{%- endfor -%}{%- endif -%}"
    "{{ '<|im_end|>\\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\\n' }}{%- endif -%}"
)


class Writer(Protocol):
    """What this script calls on `gguf.GGUFWriter` (the gguf package has no types)."""

    def add_name(self, name: str) -> None: ...
    def add_context_length(self, length: int) -> None: ...
    def add_embedding_length(self, length: int) -> None: ...
    def add_block_count(self, length: int) -> None: ...
    def add_feed_forward_length(self, length: int) -> None: ...
    def add_head_count(self, count: int) -> None: ...
    def add_head_count_kv(self, count: int) -> None: ...
    def add_rope_dimension_count(self, count: int) -> None: ...
    def add_rope_freq_base(self, value: float) -> None: ...
    def add_layer_norm_rms_eps(self, value: float) -> None: ...
    def add_file_type(self, ftype: int) -> None: ...
    def add_vocab_size(self, size: int) -> None: ...
    def add_tokenizer_model(self, model: str) -> None: ...
    def add_tokenizer_pre(self, pre: str) -> None: ...
    def add_token_list(self, tokens: list[str]) -> None: ...
    def add_token_types(self, types: list[object]) -> None: ...
    def add_token_merges(self, merges: list[str]) -> None: ...
    def add_bos_token_id(self, token_id: int) -> None: ...
    def add_eos_token_id(self, token_id: int) -> None: ...
    def add_pad_token_id(self, token_id: int) -> None: ...
    def add_add_bos_token(self, value: bool) -> None: ...
    def add_chat_template(self, value: str) -> None: ...
    def add_tensor(self, name: str, tensor: npt.NDArray[np.float16] | npt.NDArray[np.float32]
                   ) -> None: ...


def vocab_of(tj: dict[str, Any], gguf: ModuleType) -> tuple[list[str], list[object], dict[str, int]]:
    """(tokens by id, token types, special tokens → id) from a tokenizer.json dict."""
    vocab: dict[str, int] = tj["model"]["vocab"]
    added = {t["content"]: t["id"] for t in tj.get("added_tokens", [])}
    n = max(max(vocab.values()), max(added.values(), default=0)) + 1
    tokens = [""] * n
    for table in (vocab, added):
        for t, i in table.items():
            tokens[i] = t
    types = [gguf.TokenType.CONTROL if t in added else gguf.TokenType.NORMAL for t in tokens]
    return tokens, types, added


def write_header(w: Writer, a: argparse.Namespace, tj: dict[str, Any], gguf: ModuleType) -> int:
    """Hyper-parameters and tokenizer metadata; returns the vocabulary size."""
    tokens, types, added = vocab_of(tj, gguf)
    w.add_name("tiny-random-llama")
    w.add_context_length(a.ctx)
    w.add_embedding_length(a.hidden)
    w.add_block_count(a.layers)
    w.add_feed_forward_length(a.ff)
    w.add_head_count(a.heads)
    w.add_head_count_kv(a.kv_heads)
    w.add_rope_dimension_count(a.hidden // a.heads)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    w.add_vocab_size(len(tokens))
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges([m if isinstance(m, str) else " ".join(m)
                        for m in tj["model"]["merges"]])
    w.add_bos_token_id(added["<|endoftext|>"])
    w.add_eos_token_id(added["<|im_end|>"])
    w.add_pad_token_id(added["<|endoftext|>"])
    w.add_add_bos_token(False)
    w.add_chat_template(CHAT_TEMPLATE)
    return len(tokens)


def write_tensors(w: Writer, a: argparse.Namespace, n_vocab: int) -> None:
    """Random N(0, 0.02) f16 weights (seeded), unit norms."""
    rng = np.random.default_rng(a.seed)

    def rnd(*shape: int) -> npt.NDArray[np.float16]:
        return (rng.standard_normal(shape, dtype=np.float32) * 0.02).astype(np.float16)

    hd, ones = a.hidden // a.heads, np.ones(a.hidden, dtype=np.float32)
    w.add_tensor("token_embd.weight", rnd(n_vocab, a.hidden))
    for i in range(a.layers):
        w.add_tensor(f"blk.{i}.attn_norm.weight", ones)
        w.add_tensor(f"blk.{i}.attn_q.weight", rnd(a.heads * hd, a.hidden))
        w.add_tensor(f"blk.{i}.attn_k.weight", rnd(a.kv_heads * hd, a.hidden))
        w.add_tensor(f"blk.{i}.attn_v.weight", rnd(a.kv_heads * hd, a.hidden))
        w.add_tensor(f"blk.{i}.attn_output.weight", rnd(a.hidden, a.heads * hd))
        w.add_tensor(f"blk.{i}.ffn_norm.weight", ones)
        w.add_tensor(f"blk.{i}.ffn_gate.weight", rnd(a.ff, a.hidden))
        w.add_tensor(f"blk.{i}.ffn_up.weight", rnd(a.ff, a.hidden))
        w.add_tensor(f"blk.{i}.ffn_down.weight", rnd(a.hidden, a.ff))
    w.add_tensor("output_norm.weight", ones)
    w.add_tensor("output.weight", rnd(n_vocab, a.hidden))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("out", type=Path)
    for name, default in (("vocab", 8192), ("hidden", 256), ("layers", 2), ("heads", 4),
                          ("kv-heads", 2), ("ff", 512), ("ctx", 131072), ("seed", 0)):
        ap.add_argument(f"--{name}", type=int, default=default)
    a = ap.parse_args(argv)
    import gguf  # type: ignore[import-not-found]
    tj = json.loads(train_tokenizer(a.vocab).to_str())
    w = gguf.GGUFWriter(str(a.out), "llama")
    n_vocab = write_header(w, a, tj, gguf)
    write_tensors(w, a, n_vocab)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(json.dumps({"out": str(a.out), "n_vocab": n_vocab, "bytes": a.out.stat().st_size}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
