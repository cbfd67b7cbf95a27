"""Scenarios: validated, immutable descriptions of agentic sessions."""

from simulator.scenario.model import Scenario

__all__ = ["Scenario"]
