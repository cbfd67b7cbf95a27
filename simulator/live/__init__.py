"""Watching a run while it runs: live figures, the dashboard, the load generator's own
Prometheus metrics, and following a run directory (`endurance watch`)."""
