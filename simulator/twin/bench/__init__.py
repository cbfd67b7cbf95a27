"""Benchmark loads on the twin engine (`vllm bench serve`'s shape, in virtual time)."""
