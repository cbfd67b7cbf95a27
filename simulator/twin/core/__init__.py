"""The twin's engine as vLLM V1 keeps it: scheduler, KV cache manager, block pool,
requests, the engine's typed config and stats.
"""
