"""The official SDK paths (anthropic, openai)."""
