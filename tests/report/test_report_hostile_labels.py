"""Labels and names are data (issue 29 item 6): a label with control characters, a
bidi override or HTML goes into report.md and report.html escaped — a newline cannot
split the Markdown heading, an RTL override cannot reverse the title, no tag renders."""

from __future__ import annotations

from pathlib import Path

from simulator.report.html import render_report
from simulator.run.execute import execute
from simulator.run.spec import RunSpec
from simulator.util.visible import visible
from tests.conftest import small_scenario
from tests.reliability_twin import write_yaml

LABEL = "fast\n# injected\u202eevil<script>alert(1)</script>|x\x1b[31m"


def test_visible_escapes_hidden_characters_only() -> None:
    assert visible("plain ✓ täxt") == "plain ✓ täxt"
    assert visible("a\nb\u202ec\u200bd\x00") == "a\\nb\\u202ec\\u200bd\\x00"
    assert visible("x" * 10, 4) == "xxxx…"


def test_a_hostile_label_is_escaped_in_both_reports(tmp_path: Path) -> None:
    path = write_yaml(tmp_path / "s.yaml", small_scenario(turns=2))
    res = execute(RunSpec(str(path), out_dir=tmp_path / "r", show_progress=False,
                          label=LABEL), echo=lambda s: None)
    paths = render_report(res.run_dir)
    md = paths.markdown.read_text(encoding="utf-8")
    page = paths.html.read_text(encoding="utf-8")
    for text in (md, page):
        assert "\u202e" not in text and "\x1b" not in text
        assert "<script>" not in text
        assert "\\u202e" in text and "&lt;script&gt;" in text
    heading = md.splitlines()[0]
    assert heading.startswith("# endurance report — fast\\n# injected")
    assert not any(line.startswith("# injected") for line in md.splitlines())
    title = page[page.index("<title>"):page.index("</title>")]
    h1 = page[page.index("<h1>"):page.index("</h1>")]
    assert "\\n# injected" in title and "\\n# injected" in h1
