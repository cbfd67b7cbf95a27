"""Disaggregated serving: prefill and decode instances and the KV link between them."""
