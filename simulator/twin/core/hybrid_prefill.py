"""Prefill of hybrid models (linear-attention layers) as vLLM's `align` state cache runs it.

With prefix caching on, vLLM keeps a linear-attention layer's recurrent state only at
block boundaries (`mamba_cache_mode: align`, `mamba_block_size = block_size`;
`model_executor/models/config.py`). Its scheduler therefore cuts every prefill chunk to
end on a block boundary (`Scheduler._mamba_block_aligned_split`,
`v1/core/sched/scheduler.py`): a chunk short of the prompt's last full block is floored
to whole blocks, a chunk that would cross that block is cut at it (so its state is
cached), and the tail after it is computed alone. A state is written only where a step
ends (`MambaManager.allocate_new_blocks` keeps one running-state block; the blocks a
chunk skips are null blocks, `v1/core/single_type_kv_cache_manager.py`), and vLLM 0.32
keeps it for the prefix cache only at the request's replay boundary and at a
shared-prefix junction (`kv_cache_manager`); a chunk that would run past the junction
stops there. A later request's hit (`MambaManager.find_longest_cache_hit`, searched
right to left) resumes at the last boundary with a kept state, and the partial block
after it is recomputed. Token counts are in tokens.
"""

from __future__ import annotations

from collections.abc import Iterator


def aligned_split(num_computed: int, num_new: int, num_tokens: int, num_prompt: int,
                  block_size: int, junction: int = 0) -> int:
    """Tokens a prefill step may compute (vLLM 0.32's `_mamba_block_aligned_split`, no
    EAGLE, no partial hits). `num_new` is what the budget allows; 0 means the step cannot
    take a whole block and the request waits (vLLM skips it that step). Decode (past the
    prompt) is untouched.

    The chunk ends on a block boundary unless it ends the prefill; it stops early at the
    next boundary when it starts mid-block, at the last cacheable boundary
    ((num_tokens − 1) // block · block: one token is left to recompute on a resend,
    `get_mamba_prefill_checkpoint_position`), and at the shared-prefix `junction` (where
    another request's attention blocks end beyond the saved state: its state is kept)."""
    prefill_end = max(num_prompt, num_tokens - 1)
    if num_computed >= prefill_end:
        return num_new
    start, end = num_computed, num_computed + num_new
    if end < prefill_end:
        end = end // block_size * block_size
    last_cache_position = (num_tokens - 1) // block_size * block_size
    stops = (
        (start // block_size + 1) * block_size if start % block_size else 0,
        last_cache_position,
        start + (junction - start) // block_size * block_size if start < junction < end else 0,
    )
    end = min((x for x in stops if start < x < end), default=end)
    return max(end - start, 0)


def aligned_hit(cached: int, block_size: int) -> int:
    """Where a hit on a prefix of `cached` tokens resumes when the request that cached it
    ended there (a state at its last full block): the last block boundary ≤ `cached`."""
    return max(0, cached) // block_size * block_size


def prefill_chunks(prompt: int, cached: int, budget: int, block_size: int | None
                   ) -> Iterator[tuple[int, int]]:
    """(computed before, chunk) for each step of one prompt prefilled alone.

    `block_size` None: a plain model (chunks of `budget` from `cached`). Otherwise the
    hit is block-aligned (`aligned_hit`) and every chunk `aligned_split`."""
    # a hybrid's hit is capped as vLLM's lookup is: at least one token is computed
    done = cached if block_size is None else aligned_hit(min(cached, prompt - 1), block_size)
    while True:
        chunk = max(1, min(budget, prompt - done))
        if block_size is not None:
            chunk = aligned_split(done, chunk, prompt, prompt, block_size)
            if chunk <= 0:
                raise ValueError(f"budget {budget} is below the block size {block_size}: "
                                 "vLLM could never schedule this prefill")
        yield done, chunk
        done += chunk
        if done >= prompt:
            return
