"""Exporters: a run's records → the trace formats other replayers read (cc-traces,
Mooncake), with hash ids over the tokens actually sent (`metrics.blocks`)."""
