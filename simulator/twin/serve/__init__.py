"""Serving fronts of the twin: prompt and reply synthesis, the HTTP server (Anthropic and
OpenAI wire shapes), its real-time service, faults, metrics.
"""
