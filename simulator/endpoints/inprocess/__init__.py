"""Endpoints that run an engine in this process: the twin and a fleet of twins, with the engine's log."""
