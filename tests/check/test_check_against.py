"""`endurance check URL --against URL2`: same probes to two endpoints, diff the replies."""

from __future__ import annotations

from simulator.check.compare import PROBES, ProbeResult, compare_endpoints
from simulator.twin.serve.server import serving, twin_app


async def test_speculation_on_the_twin_is_lossless_and_a_change_is_diffed() -> None:
    plain, _ = twin_app("a40", "qwen3-coder-30b-a3b-awq", instant=True)
    spec, _ = twin_app("a40", "qwen3-coder-30b-a3b-awq", spec="ngram:5", instant=True)
    other, _ = twin_app("a40", "qwen3-coder-30b-a3b-awq", seed=7, instant=True)
    async with serving(plain) as a, serving(spec) as b, serving(other) as c:
        same = await compare_endpoints(a, b, timeout_s=30, max_tokens=60)
        changed = await compare_endpoints(a, c, timeout_s=30, max_tokens=60)
    assert [r.name for r in same] == [name for name, _ in PROBES]
    assert all(r.same and r.diff() == "" for r in same)
    assert any(not r.same for r in changed)
    first = next(r for r in changed if not r.same)
    assert first.diff("a", "c").startswith("--- a\n+++ c\n")


async def test_unreachable_endpoint_is_an_error_not_a_match() -> None:
    plain, _ = twin_app("a40", "qwen3-coder-30b-a3b-awq", instant=True)
    async with serving(plain) as a:
        res = await compare_endpoints(a, "http://127.0.0.1:9", model_b="m", timeout_s=5,
                                      max_tokens=10)
    assert res and all(not r.same and r.error for r in res)


def test_diff_of_missing_text_is_empty() -> None:
    assert ProbeResult("p", None, "x", "boom").diff() == ""
    assert not ProbeResult("p", "x", "y").same
