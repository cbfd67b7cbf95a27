"""Convert the SmolLM2 GGUF into an HF directory vLLM (CPU) can serve. Run with the vLLM
venv's python (it needs torch, transformers, gguf and accelerate, which the project does
not depend on):

    python smollm2_hf.py DIR GGUF_NAME     # writes DIR/hf (about 30 s on 2 cores)

transformers dequantises the Q4_1 weights on load. `save_pretrained` refuses the tied,
dequantised weights, so the state dict is saved with safetensors directly (lm_head is
tied to the embeddings and left out), and the `quantization_config` (gguf) the saved
config carries is dropped: vLLM refuses it. The steps follow
`../shared/tools/real-engine/make_smollm2.sh`, tried on this kind of machine.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def convert(out: Path, gguf_name: str) -> Path:
    """Write out/hf (weights, config, tokenizer) from out/gguf_name; return out/hf."""
    from safetensors.torch import save_file  # type: ignore[import-not-found]
    from transformers import AutoModelForCausalLM, AutoTokenizer  # type: ignore[import-not-found]
    tok = AutoTokenizer.from_pretrained(out, gguf_file=gguf_name)
    model = AutoModelForCausalLM.from_pretrained(out, gguf_file=gguf_name)
    hf = out / "hf.part"
    hf.mkdir(exist_ok=True)
    state = {k: v.contiguous() for k, v in model.state_dict().items() if k != "lm_head.weight"}
    save_file(state, str(hf / "model.safetensors"), metadata={"format": "pt"})
    model.config.save_pretrained(hf)
    tok.save_pretrained(hf)
    cfg = json.loads((hf / "config.json").read_text())
    cfg.pop("quantization_config", None)
    (hf / "config.json").write_text(json.dumps(cfg, indent=1))
    final = out / "hf"
    hf.rename(final)
    return final


if __name__ == "__main__":
    print("HF model in", convert(Path(sys.argv[1]), sys.argv[2]))
