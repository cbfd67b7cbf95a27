"""A small byte-level BPE tokenizer trained on the CPython standard library.

Deterministic (sorted files, fixed size cap) and offline, so every machine builds the
same vocabulary. Used by `tiny_model.py` and `tiny_gguf.py`, which run inside an engine
venv where the `tokenizers` package is installed (the project itself does not need it).
"""

from __future__ import annotations

import sysconfig
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


class TrainedTokenizer(Protocol):
    """What `tiny_model.py` and `tiny_gguf.py` call on a `tokenizers.Tokenizer` (the
    package is the engine venv's, untyped here)."""

    def add_special_tokens(self, tokens: list[str]) -> int: ...
    def to_str(self) -> str: ...


def corpus_files(limit_bytes: int) -> Iterator[str]:
    """Standard-library .py files in sorted order until `limit_bytes` (bytes) is reached."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    total = 0
    for p in sorted(stdlib.rglob("*.py")):
        if "site-packages" in p.parts or "test" in p.parts:
            continue
        try:
            total += p.stat().st_size
        except OSError:
            continue
        yield str(p)
        if total >= limit_bytes:
            return


def train_tokenizer(vocab: int, corpus_mb: float = 8.0) -> TrainedTokenizer:
    """A `tokenizers.Tokenizer` (byte-level BPE, `vocab` entries, ChatML specials)."""
    from tokenizers import (  # type: ignore[import-not-found]
        Tokenizer,
        decoders,
        models,
        pre_tokenizers,
        processors,
        trainers,
    )
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train(list(corpus_files(int(corpus_mb * 1e6))), trainer)
    trained: TrainedTokenizer = tok
    return trained
