"""Write a tiny Llama-style HF model directory for vLLM (config + tokenizer, no weights;
`--load-format dummy` fills random weights). Run with the vLLM venv's python:

    python tiny_model.py OUT_DIR [--unreachable-eos]

`--unreachable-eos` adds an EOS token whose id lies outside the model's logits, so a
random-weight model never stops early: every reply runs to max_tokens.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

if __package__ in (None, ""):   # run as a script from the engine venv
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from simulator.engines.tiny_tokenizer import train_tokenizer

# ChatML/Hermes template (like Qwen2.5): renders tools, assistant tool_calls as
# <tool_call>{json}</tool_call>, tool results as <tool_response>, so vLLM can run with
# --tool-call-parser hermes; accepts list-of-parts content and system messages anywhere
# (Claude Code's inline reminders) so vLLM does not merge them into the first one, which
# would break prefix reuse.
CHAT_TEMPLATE = (
    "{%- macro render(c) -%}"
    "{%- if c is string -%}{{ c }}"
    "{%- elif c is iterable -%}{%- for p in c -%}"
    "{%- if p is string -%}{{ p }}{%- elif p['type'] == 'text' -%}{{ p['text'] }}{%- endif -%}"
    "{%- endfor -%}{%- endif -%}"
    "{%- endmacro -%}"
    "{%- if tools -%}"
    "{{ '<|im_start|>system\\n# Tools\\n<tools>\\n' }}"
    "{%- for t in tools -%}{{ t | tojson }}{{ '\\n' }}{%- endfor -%}"
    "{{ '</tools>\\nCall a tool with <tool_call>{\"name\": ..., \"arguments\": ...}"
    "</tool_call><|im_end|>\\n' }}"
    "{%- endif -%}"
    "{%- for message in messages -%}"
    "{%- if message['role'] == 'tool' -%}"
    "{{ '<|im_start|>tool\\n<tool_response>\\n' }}{{ render(message['content']) }}"
    "{{ '\\n</tool_response><|im_end|>\\n' }}"
    "{%- else -%}"
    "{{ '<|im_start|>' + message['role'] + '\\n' }}{{ render(message['content']) }}"
    "{%- if message['tool_calls'] is defined and message['tool_calls'] -%}"
    "{%- for tc in message['tool_calls'] -%}"
    "{%- set f = tc['function'] if tc['function'] is defined else tc -%}"
    "{{ '\\n<tool_call>\\n{\"name\": \"' + f['name'] + '\", \"arguments\": ' }}"
    "{%- if f['arguments'] is string -%}{{ f['arguments'] }}"
    "{%- else -%}{{ f['arguments'] | tojson }}{%- endif -%}"
    "{{ '}\\n</tool_call>' }}"
    "{%- endfor -%}"
    "{%- endif -%}"
    "{{ '<|im_end|>\\n' }}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\\n' }}{%- endif -%}"
)


def llama_config(a: argparse.Namespace, vocab_size: int, bos: int, eos: int) -> dict[str, object]:
    """config.json of a `LlamaForCausalLM` with the given sizes."""
    return {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "hidden_size": a.hidden, "intermediate_size": a.intermediate,
        "num_hidden_layers": a.layers, "num_attention_heads": a.heads,
        "num_key_value_heads": a.kv_heads, "head_dim": a.hidden // a.heads,
        "hidden_act": "silu", "max_position_embeddings": a.max_pos, "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0, "tie_word_embeddings": True, "vocab_size": vocab_size,
        "bos_token_id": bos, "eos_token_id": eos, "pad_token_id": bos,
        "torch_dtype": "bfloat16", "attention_bias": False, "mlp_bias": False,
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("out", type=Path)
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--intermediate", type=int, default=512)
    ap.add_argument("--max-pos", type=int, default=131072)
    ap.add_argument("--unreachable-eos", action="store_true")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    from transformers import PreTrainedTokenizerFast  # type: ignore[import-not-found]
    tok = train_tokenizer(a.vocab)
    eos = "<|im_end|>"
    if a.unreachable_eos:
        tok.add_special_tokens(["<|eos|>"])
        eos = "<|eos|>"
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|endoftext|>",
                                 eos_token=eos, pad_token="<|endoftext|>", unk_token=None,
                                 model_max_length=a.max_pos)
    hf.chat_template = CHAT_TEMPLATE
    a.out.mkdir(parents=True, exist_ok=True)
    hf.save_pretrained(str(a.out))
    cfg_path = a.out / "tokenizer_config.json"   # vLLM reads the template from here too
    tcfg = json.loads(cfg_path.read_text())
    tcfg.update(chat_template=CHAT_TEMPLATE, tokenizer_class="PreTrainedTokenizerFast")
    cfg_path.write_text(json.dumps(tcfg, indent=2))
    eos_id, bos_id = hf.convert_tokens_to_ids(eos), hf.convert_tokens_to_ids("<|endoftext|>")
    # logits cover ids [0, vocab_size): with an unreachable EOS that excludes the EOS id
    vocab_size = eos_id if a.unreachable_eos else ((len(hf) + 63) // 64) * 64
    (a.out / "generation_config.json").write_text(json.dumps(
        {"bos_token_id": bos_id, "eos_token_id": eos_id, "pad_token_id": bos_id}))
    # config.json last: the installer treats its presence as "model complete"
    (a.out / "config.json").write_text(json.dumps(
        llama_config(a, vocab_size, bos_id, eos_id), indent=2))
    print(json.dumps({"out": str(a.out), "tokenizer_len": len(hf), "vocab_size": vocab_size,
                      "eos_id": eos_id}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
