"""Real inference engines for tests and demos: vLLM (CPU) and llama.cpp's llama-server,
installed into a cache outside the repo and served on 127.0.0.1 with a tiny
random-weight model. Nothing here is needed to use endurance against your own server.

Import from the submodules (`simulator.engines.install`, `simulator.engines.server`):
this file stays empty because `tiny_model.py` / `tiny_gguf.py` import
`simulator.engines.tiny_tokenizer` from inside an engine venv that lacks the
project's dependencies.
"""
