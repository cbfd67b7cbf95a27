"""endurance: an agentic endurance simulator for LLM serving endpoints."""

__version__ = "0.1.0"
