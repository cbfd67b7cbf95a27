"""HTTP transports and what runs before a run against a URL (pre-flight, cache reset)."""
