"""Sessions: conversation history, compaction policies, the agent loop and the runner."""
