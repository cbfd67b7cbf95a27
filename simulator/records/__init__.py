"""Measurements: the per-request record schema, the recorder, server-metrics scraping."""
