"""A scenario's `sampling:` on the wire (issue 48): each field it sets reaches the request
body of both protocols on every client path, fields it leaves unset are not sent, and
the twin (HTTP and in-process) resolves what a request carries against the model
profile's generation config into `EngineRequest.sampling`."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from click.testing import CliRunner

from simulator.cli import main
from simulator.endpoints.base import LLMRequest
from simulator.endpoints.inprocess.twin import InProcessTwin
from simulator.session.conversation import Prefix, user_text
from simulator.twin.core.engine import TwinEngine
from simulator.twin.core.sampling import NEUTRAL, SamplingParams
from simulator.twin.core.types import EngineRequest
from simulator.twin.serve import sampling_wire, server
from tests.conftest import run_scenario, small_scenario
from tests.http_twin import twin_in_thread
from tests.lying_servers import BLOCK, END, JSON_HEAD, SSE, START, _sized, delta, lying_server

# the A40 twin's default model: Qwen3-Coder's generation config (profile `generation_config`)
QWEN_DEFAULTS = SamplingParams(temperature=0.7, top_p=0.8, top_k=20, repetition_penalty=1.05)
FAST = ["turns=2", "think_time_s=0"]


def _recording(bodies: list[dict[str, Any]], chat: bool) -> Any:
    """A reply that keeps the request's JSON body and answers one short streamed reply
    in the protocol's own shape."""
    async def reply(w: asyncio.StreamWriter, body: bytes = b"") -> None:
        bodies.append(json.loads(body))
        if not chat:
            w.write(_sized(SSE, START + BLOCK + delta("ok") + END))
            return
        def chunk(d: dict[str, Any], finish: str | None = None) -> bytes:
            return b"data: " + json.dumps({"id": "c", "choices": [
                {"index": 0, "delta": d, "finish_reason": finish}]}).encode() + b"\n\n"
        usage = b"data: " + json.dumps({"id": "c", "choices": [], "usage": {
            "prompt_tokens": 9, "completion_tokens": 1}}).encode() + b"\n\n"
        w.write(_sized(SSE, chunk({"role": "assistant", "content": "ok"}) + chunk({}, "stop")
                       + usage + b"data: [DONE]\n\n"))
    return reply


async def _models(w: asyncio.StreamWriter, _body: bytes = b"") -> None:
    w.write(_sized(JSON_HEAD, json.dumps({"object": "list", "data": [
        {"id": "m", "object": "model", "max_model_len": 200000}]}).encode()))


def _scenario(tmp_path: Path, **over: Any) -> Path:
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(small_scenario(**over)))
    return p


def _posted(tmp_path: Path, api: str, client: str, overrides: list[str],
            **over: Any) -> list[dict[str, Any]]:
    bodies: list[dict[str, Any]] = []
    with lying_server(_recording(bodies, api == "openai-chat"), _models) as url:
        res = run_scenario(_scenario(tmp_path, **over), tmp_path / "out",
                           [*FAST, f"endpoint.api={api}", *overrides],
                           endpoint_url=url, client=client)
    assert res.status == "completed", res.outcome.reason
    assert bodies
    return bodies


# the anthropic SDK's first import takes ~2 s
CLIENTS = ["lean", "aiohttp", pytest.param("sdk", marks=pytest.mark.slow)]


@pytest.mark.parametrize("client", CLIENTS)
def test_anthropic_requests_carry_the_scenario_sampling(tmp_path: Path, client: str) -> None:
    bodies = _posted(tmp_path, "anthropic", client,
                     ["sampling.top_p=0.9", "sampling.top_k=40", "sampling.temperature=0.3"])
    for b in bodies:
        assert (b["temperature"], b["top_p"], b["top_k"]) == (0.3, 0.9, 40)
        assert not {"repetition_penalty", "frequency_penalty", "presence_penalty"} & set(b)


@pytest.mark.parametrize("client", CLIENTS)
def test_chat_requests_carry_the_scenario_sampling(tmp_path: Path, client: str) -> None:
    """The SDK sends top_k and repetition_penalty through extra_body: the same body."""
    bodies = _posted(tmp_path, "openai-chat", client,
                     ["sampling.top_p=0.5", "sampling.top_k=7", "sampling.repetition_penalty=1.2",
                      "sampling.frequency_penalty=0.25", "sampling.presence_penalty=-0.5"])
    for b in bodies:
        assert {k: b.get(k) for k in sampling_wire.CHAT_FIELDS} == {
            "temperature": 1.0, "top_p": 0.5, "top_k": 7, "repetition_penalty": 1.2,
            "frequency_penalty": 0.25, "presence_penalty": -0.5}


def test_unset_fields_are_not_sent(tmp_path: Path) -> None:
    """`temperature: null` and no `sampling:`: nothing to sample with goes on the wire,
    the server's defaults apply; the manifest says so."""
    bodies = _posted(tmp_path, "openai-chat", "lean", [], temperature=None)
    for b in bodies:
        assert not set(sampling_wire.CHAT_FIELDS) & set(b)
    manifest = json.loads(next((tmp_path / "out").glob("*/manifest.json")).read_text())
    assert manifest["sampling"]["sent"] == {} and manifest["sampling"]["resolved"] is None


# ------------------------------------------------------------------ the twin's side --
def _captured(monkeypatch: pytest.MonkeyPatch) -> list[SamplingParams | None]:
    seen: list[SamplingParams | None] = []
    real = TwinEngine.submit

    def submit(self: TwinEngine, request: EngineRequest) -> None:
        seen.append(request.sampling)
        real(self, request)
    monkeypatch.setattr(TwinEngine, "submit", submit)
    return seen


def test_sampling_temperature_wins_over_the_top_level_one(tmp_path: Path) -> None:
    from simulator.scenario.load import load_scenario
    s, _ = load_scenario(_scenario(tmp_path, temperature=0.2), ["sampling.temperature=0.5"])
    assert s.wire_sampling() == (0.5, {})
    s, _ = load_scenario(_scenario(tmp_path, temperature=0.2), [])
    assert s.wire_sampling() == (0.2, {})


def test_inprocess_twin_resolves_against_the_generation_config(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _captured(monkeypatch)
    res = run_scenario(_scenario(tmp_path), tmp_path / "out",
                       [*FAST, "endpoint.api=openai-chat", "sampling.top_k=7",
                        "sampling.presence_penalty=0.5"])
    assert res.status == "completed"
    want = SamplingParams(temperature=1.0, top_p=0.8, top_k=7, repetition_penalty=1.05,
                          presence_penalty=0.5)
    assert seen and all(s == want for s in seen)
    manifest = json.loads((res.run_dir / "manifest.json").read_text())
    assert manifest["sampling"]["sent"] == {"temperature": 1.0, "top_k": 7,
                                            "presence_penalty": 0.5}
    assert manifest["sampling"]["resolved"]["repetition_penalty"] == 1.05


def test_a_run_on_the_http_twin_states_what_it_resolved(tmp_path: Path) -> None:
    """The HTTP twin states its defaults in /v1/models: the manifest resolves them."""
    with twin_in_thread(time_scale=2000.0) as url:
        res = run_scenario(_scenario(tmp_path, think_time_s=0), tmp_path / "out",
                           ["turns=2", "sampling.top_p=0.5"], endpoint_url=url)
    assert res.status == "completed", res.outcome.reason
    assert res.manifest.to_json()["sampling"]["resolved"] == {
        "temperature": 1.0, "top_p": 0.5, "top_k": 20, "repetition_penalty": 1.05,
        "frequency_penalty": 0.0, "presence_penalty": 0.0}


def test_a_model_without_generation_config_samples_neutral() -> None:
    twin = InProcessTwin("cpu-2core", "smollm2-135m")
    req = LLMRequest("m", Prefix("s", (), 1, 0), (user_text("hi"),), 8, None)
    assert twin.sampling_of(req) == NEUTRAL


def test_inprocess_twin_refuses_what_vllm_refuses() -> None:
    twin = InProcessTwin("a40", "qwen3-coder-30b-a3b-awq")
    req = LLMRequest("m", Prefix("s", (), 1, 0), (user_text("hi"),), 8, 1.0,
                     sampling={"top_p": 0.0})
    with pytest.raises(Exception, match="top_p"):
        twin.sampling_of(req)


async def _post(url: str, path: str, data: dict[str, Any]) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as s, s.post(url + path, json=data) as r:
        return r.status, await r.json(content_type=None)


async def test_http_twin_parses_each_protocol_as_vllm_does(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Messages: temperature/top_p/top_k, penalties dropped (vLLM's Anthropic request has
    none); Chat: all six; unset fields from the generation config; bad values 400."""
    seen = _captured(monkeypatch)
    app, _ = server.twin_app("a40", "qwen3-coder-30b-a3b-awq", instant=True)
    msg = {"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]}
    async with server.serving(app) as url:
        status, _ = await _post(url, "/v1/messages",
                                {**msg, "top_k": 5, "repetition_penalty": 1.3})
        assert status == 200
        status, _ = await _post(url, "/v1/chat/completions",
                                {**msg, "top_p": 0.5, "repetition_penalty": 1.3,
                                 "frequency_penalty": None})
        assert status == 200
        for path, bad in (("/v1/messages", {"top_p": 1.5}),
                          ("/v1/chat/completions", {"presence_penalty": 3}),
                          ("/v1/chat/completions", {"top_k": -2}),
                          ("/v1/messages", {"temperature": "hot"})):
            status, reply = await _post(url, path, {**msg, **bad})
            assert status == 400, (path, bad)
            assert next(iter(bad)) in json.dumps(reply)
    assert seen == [SamplingParams(0.7, 0.8, 5, 1.05), SamplingParams(0.7, 0.5, 20, 1.3)]
    assert sampling_wire.defaults_of(
        {"temperature": 0.7, "top_p": 0.8, "top_k": 20, "repetition_penalty": 1.05}) == QWEN_DEFAULTS


def test_resolution_keeps_vllms_meaning_of_top_k_off() -> None:
    assert sampling_wire.resolve({"top_k": -1}, QWEN_DEFAULTS).top_k == 0
    assert sampling_wire.resolve({}, QWEN_DEFAULTS) is QWEN_DEFAULTS


# ------------------------------------------------------------- validation ---------
@pytest.mark.parametrize(("over", "key"), [
    ({"sampling": {"top_p": 1.5}}, "sampling.top_p"),
    ({"sampling": {"top_k": -3}}, "sampling.top_k"),
    ({"sampling": {"temperature": -0.1}}, "sampling.temperature"),
    ({"sampling": {"frequency_penalty": 2.5}, "endpoint": {"api": "openai-chat"}},
     "sampling.frequency_penalty"),
    ({"sampling": {"repetition_penalty": 0}, "endpoint": {"api": "openai-chat"}},
     "sampling.repetition_penalty"),
    ({"sampling": {"presence_penalty": 0.5}}, "sampling.presence_penalty"),   # Anthropic
    ({"sampling": {"min_p": 0.1}}, "sampling.min_p"),
])
def test_validate_names_the_bad_key_in_one_line(tmp_path: Path, over: dict[str, Any],
                                                key: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(small_scenario(**over)))
    r = CliRunner().invoke(main, ["validate", str(path)])
    assert r.exit_code == 2 and "Traceback" not in r.output
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and key in lines[0], r.output
