"""The twin: a calibrated, simulated vLLM serving engine (everything it produces is
labelled simulated)."""
