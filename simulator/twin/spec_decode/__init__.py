"""Speculative decoding in the twin: the n-gram proposer, replays of scripted exchanges,
what-ifs and content predictability.
"""
