"""Each twin model serves its own context window, from its profile (issue 23): the
window was read off the performance model by a `getattr` of an attribute that never
existed, so every model served 262,144 tokens."""

from __future__ import annotations

from pathlib import Path

import pytest

from simulator.endpoints.inprocess.twin import InProcessTwin
from simulator.errors import InputError
from simulator.twin.core.config import engine_config
from simulator.twin.model.perf_model import build_perf_model
from simulator.twin.model.profiles import load_model
from simulator.twin.serve import reply

MODELS = sorted(p.stem for p in (Path(__file__).resolve().parents[3] / "simulator" / "twin" / "model"
                                 / "profiles" / "models").glob("*.yaml"))


@pytest.mark.parametrize("name", MODELS)
def test_every_shipped_model_states_a_sourced_context_length(name: str) -> None:
    m = load_model(name)
    assert m.context_length is not None and m.context_length > 0
    assert m.sources.get("context_length")


@pytest.mark.parametrize(("hardware", "model", "window"), [
    ("h200", "kimi-linear-48b-a3b-awq", 1_048_576),
    ("a40", "llama-3.1-8b", 131_072),
    ("a40", "qwen3-coder-30b-a3b-awq", 262_144),
])
def test_the_twin_serves_the_model_s_window(hardware: str, model: str, window: int) -> None:
    twin = InProcessTwin(hardware, model)
    assert twin.context_window == window == twin.config.scheduler.max_model_len
    reply.check_window(window - 1, twin.context_window)          # fits
    with pytest.raises(reply.PromptTooLong, match=f"{window} maximum"):
        reply.check_window(window, twin.context_window)            # Llama's 131,072 enforced


def test_http_twin_states_the_model_s_window() -> None:
    import json
    import urllib.request

    from tests.http_twin import twin_in_thread
    with twin_in_thread("a40", "llama-3.1-8b", time_scale=1000.0) as url, \
            urllib.request.urlopen(url + "/v1/models", timeout=5) as r:
        assert json.loads(r.read())["data"][0]["max_model_len"] == 131_072


def test_a_shorter_window_may_be_served_never_a_longer_one() -> None:
    perf = build_perf_model("a40", "llama-3.1-8b")
    assert engine_config(perf, context_window=32_768).scheduler.max_model_len == 32_768
    with pytest.raises(InputError, match="131072"):
        engine_config(perf, context_window=262_144)
