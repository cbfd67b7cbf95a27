"""Every command the README and the documentation pages (`docs/*.md`) show works as
written, on a fresh copy of the repository (issues 16, 27): the fenced code blocks are
parsed generically, so sections and pages added later are covered too. Each file runs on
its own fresh copy, so a page's placeholders name runs that page made.

Rule for what runs: every command of every fenced `bash`/`sh` block, except commands
that install something (pip, venv, apt, the engine installer), start a long-lived
server (vLLM, llama-server, `twin serve`), run the test suite or linters (pytest, ruff,
mypy: CI runs those), set environment variables, use the engines' install directory
(`$E`), or name a host other than this machine. Commands aimed at
`http://127.0.0.1:PORT` run against an HTTP twin started here instead of the real
server. Placeholders: `results/<run-id>` is the newest run, `results/<X-run>` the newest
run labelled (or compacting with) X, `results/<sweep-dir>` / `results/<size-dir>` the
folder the page's last `sweep` / `size` printed, `MODEL` a model name. A comment
`# exit N` on the command's line states an expected exit code other than 0. Blocks
tagged `text` (output, expensive commands) are not run.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.http_twin import twin_server

README = ROOT / "README.md"


def doc_files(root: Path = ROOT) -> list[Path]:
    """The README and every page of the documentation site."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


DOCS = [p.relative_to(ROOT).as_posix() for p in doc_files()]

_SKIP_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("installs", re.compile(r"\bpip3? install\b|-m venv\b|engines\.install|install_peers"
                            r"|apt-get|real_engines\.sh|\.ci/run")),
    ("starts a server", re.compile(r"vllm\.entrypoints|llama-server|\btwin serve\b")),
    ("test suite / linters (CI)", re.compile(r"\bpytest\b|\bruff\b|\bmypy\b")),
    ("environment", re.compile(r"^export\b|^[A-Za-z_][A-Za-z0-9_]*=\S*$")),
    ("engines' install directory", re.compile(r"\$E\b|endurance-engines")),
    ("another host", re.compile(r"https?://(?!127\.0\.0\.1[:/]|localhost[:/])")),
)
_LOCAL_URL = re.compile(r"https?://(?:127\.0\.0\.1|localhost)(?::\d+)?")
_PLACEHOLDER = re.compile(r"<([A-Za-z0-9_.-]+)>")


@dataclass
class Command:
    text: str                      # as the README shows it (continuations joined)
    argv: list[str]
    expect_rc: int = 0
    skip: str | None = None        # why it does not run here


def readme_blocks(text: str) -> list[str]:
    """The bodies of fenced code blocks tagged bash/sh/shell/console (untagged blocks
    are diagrams and sample output)."""
    out, body, lang = [], None, ""
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("```"):
            if body is None:
                lang = stripped[3:].strip().lower()
                body = []
            else:
                if lang in ("bash", "sh", "shell", "console"):
                    out.append("\n".join(body))
                body = None
        elif body is not None:
            body.append(line)
    return out


def block_commands(block: str) -> list[Command]:
    """Commands of one block: continuations joined, comments dropped, `&&` split."""
    logical, cur = [], ""
    for line in block.splitlines():
        if line.rstrip().endswith("\\"):
            cur += line.rstrip()[:-1] + " "
            continue
        logical.append(cur + line)
        cur = ""
    if cur:
        logical.append(cur)
    out = []
    for line in logical:
        m = re.search(r"#\s*exit\s+(\d+)\s*$", line)
        expect = int(m.group(1)) if m else 0
        try:
            tokens = shlex.split(line, comments=True)
        except ValueError:
            continue
        parts: list[list[str]] = [[]]
        for t in tokens:
            if t == "&&":
                parts.append([])
            else:
                parts[-1].append(t)
        for argv in parts:
            if argv:
                text = shlex.join(argv)
                out.append(Command(text, argv, expect, _skip_reason(text)))
    return out


def _skip_reason(text: str) -> str | None:
    for why, rule in _SKIP_RULES:
        if rule.search(text):
            return why
    tokens = shlex.split(text)          # `[--endpoint URL]` is two tokens
    if any(t.startswith("[") for t in tokens) and any(t.endswith("]") for t in tokens):
        return "optional arguments in brackets"
    return None


def readme_commands(text: str) -> list[Command]:
    return [c for b in readme_blocks(text) for c in block_commands(b)]


# -------------------------------------------------------------------- fast checks
def test_the_readme_parser_finds_and_classifies_the_commands() -> None:
    cmds = [c for f in doc_files() for c in readme_commands(f.read_text(encoding="utf-8"))]
    runnable = [c for c in cmds if c.skip is None]
    assert len(runnable) >= 8
    texts = [c.text for c in runnable]
    assert any(t.startswith(".venv/bin/endurance run scenarios/") for t in texts)
    assert any(" compare " in t for t in texts) and any(" --endpoint " in t for t in texts)
    skipped = {c.skip for c in cmds if c.skip}
    assert {"installs", "starts a server", "test suite / linters (CI)"} <= skipped
    # The quick start's chain: the install parts skip, its `run` runs.
    assert any(c.text.endswith("--label block") and c.skip is None for c in cmds)
    readme = readme_commands(README.read_text(encoding="utf-8"))
    assert any(c.text.startswith("python3 -m venv") for c in readme)   # the quick start
    assert any(c.text == ".venv/bin/pytest" for c in readme)


def test_every_docs_page_is_in_the_site_navigation() -> None:
    import yaml
    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["nav"]

    def pages(node: object) -> list[str]:
        if isinstance(node, str):
            return [node]
        if isinstance(node, list):
            return [p for n in node for p in pages(n)]
        if isinstance(node, dict):
            return [p for v in node.values() for p in pages(v)]
        return []

    listed = set(pages(nav))
    assert {p.name for p in (ROOT / "docs").glob("*.md")} <= listed


def test_block_commands_rules() -> None:
    cmds = block_commands("# a comment\nfoo a \\\n  b  # trailing\nexport X=1\n"
                          "pip install x && tool run   # exit 2\n"
                          "curl http://gpu-box:8000/x\ntool http://127.0.0.1:8000")
    assert [(c.text, c.skip, c.expect_rc) for c in cmds] == [
        ("foo a b", None, 0), ("export X=1", "environment", 0),
        ("pip install x", "installs", 2), ("tool run", None, 2),
        ("curl http://gpu-box:8000/x", "another host", 0),
        ("tool http://127.0.0.1:8000", None, 0)]


# -------------------------------------------------------------------- the real thing
@dataclass
class _State:
    repo: Path
    env: dict[str, str]
    twin_url: str
    runs: list[Path] = field(default_factory=list)
    folders: dict[str, Path] = field(default_factory=dict)   # sweep-dir, size-dir


def _fresh_copy(dest: Path) -> Path:
    """The repository as a fresh clone has it (tracked and unignored files), without
    results, caches or a venv; `.venv` links to the venv running this test."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT,
                           check=True, capture_output=True).stdout.decode().split("\0")
    for rel in filter(None, files):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    (dest / "results").mkdir(exist_ok=True)
    (dest / ".venv").symlink_to(Path(sys.prefix))
    return dest


def _resolve_placeholders(argv: list[str], st: _State) -> list[str]:
    out = []
    for tok in argv:
        m = _PLACEHOLDER.search(tok)
        if m is not None and tok.startswith("results/") and m.group(1) in st.folders:
            tok = str(st.folders[m.group(1)])
        elif m is not None and tok.startswith("results/"):
            tok = str(_run_for(m.group(1), st))
        tok = _LOCAL_URL.sub(st.twin_url, tok)
        out.append("tiny" if tok == "MODEL" else tok)
    return out


def _run_for(name: str, st: _State) -> Path:
    assert st.runs, f"results/<{name}> named before any run"
    if name == "run-id":
        return st.runs[-1]
    want = name.removesuffix("-run")
    for run in reversed(st.runs):
        m = _manifest(run)
        if want in (m.get("label"), m.get("compaction")):
            return run
    raise AssertionError(f"no run matches placeholder <{name}>: {st.runs}")


def _manifest(run: Path) -> dict[str, object]:
    data: dict[str, object] = json.loads((run / "manifest.json").read_text())
    return data


def _execute(cmd: Command, st: _State) -> tuple[list[str], subprocess.CompletedProcess[str]]:
    argv = _resolve_placeholders(cmd.argv, st)
    if "/" in argv[0] and not argv[0].startswith("/"):
        argv[0] = str(st.repo / argv[0])
    return argv, subprocess.run(argv, cwd=st.repo, env=st.env, capture_output=True,
                                text=True, timeout=1200, check=False)


def _check_effects(argv: list[str], proc: subprocess.CompletedProcess[str], st: _State) -> None:
    """What the README claims for each kind of command, beyond its exit code."""
    sub = argv[1] if len(argv) > 1 and argv[0].endswith("endurance") else ""
    last = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    if sub == "run":
        run = st.repo / last
        assert (run / "summary.json").is_file() and (run / "turns.parquet").is_file(), last
        manifest = _manifest(run)
        assert manifest["status"] == "completed"
        if "--endpoint" in argv:
            assert manifest["simulated"] is True, "the HTTP twin must be recorded as simulated"
        if "--twin" in argv:
            hw, model = argv[argv.index("--twin") + 1].split("/")
            desc = manifest["endpoint"]
            assert isinstance(desc, dict)
            assert desc["hardware"] == hw and model.startswith(str(desc["model"]))
            if ":" in model:
                assert desc["profile"]["model"]["quantization"] == model.split(":")[1]
        if "--label" in argv:
            assert manifest["label"] == argv[argv.index("--label") + 1]
        st.runs.append(run)
    elif sub == "report":
        run = Path(argv[2])
        if (run / "sweep.json").is_file() or (run / "size.json").is_file():
            assert (run / "sizing_report.html").stat().st_size > 10_000
        else:
            assert (run / "report.html").stat().st_size > 10_000
            assert (run / "report.md").is_file()
    elif sub == "compare":
        assert "overlay:" in proc.stdout and "95% CI" in proc.stdout
        runs = [Path(a) for a in argv[2:] if not a.startswith("-")]
        for run in runs:
            label = _manifest(run).get("label")
            if label:
                assert str(label) in proc.stdout, f"label {label} missing from the comparison"
        _check_prune_costs_the_cache(runs)
    elif sub == "sweep":
        folder = st.repo / last
        assert folder.is_dir()
        st.folders["sweep-dir"] = folder
        # every sizing example ends steady at every point it prints (issue 27)
        for name in ("sweep.json", "spec-sweep.json"):
            if (folder / name).is_file():
                rows = json.loads((folder / name).read_text())
                bad = [r.get("sessions") for r in rows if r.get("steady_state") is False]
                assert not bad, f"not steady at {bad} sessions: {argv}"
    elif sub == "size":
        # a session count, or a team replay's cards (docs/team-telemetry.md)
        assert "session(s) meet" in proc.stdout or " card(s) serve " in proc.stdout
        st.folders["size-dir"] = st.repo / last
    elif sub == "check" and "--recall" in argv:
        # a recall table (the twin labels its own: recall = retention by construction)
        assert "recall check" in proc.stdout and "recalled" in proc.stdout, proc.stdout
    elif sub == "check":
        assert "0 fail" in proc.stdout


def _check_prune_costs_the_cache(runs: list[Path]) -> None:
    """The README's claim for block vs prune: prune destroys the prefix cache."""
    by_kind = {_manifest(r).get("compaction"): r for r in runs}
    if not {"block", "prune"} <= set(by_kind):
        return
    share = {}
    for kind in ("block", "prune"):
        summary = json.loads((by_kind[kind] / "summary.json").read_text())
        assert summary["compaction_events"] >= 1, f"{kind}: no compaction: shows nothing"
        share[kind] = summary["server_cache_read_share"]
    assert share["prune"] < 0.75 * share["block"], share


@pytest.mark.slow
@pytest.mark.parametrize("doc", DOCS)
def test_every_command_of_a_doc_works_on_a_fresh_copy(doc: str, tmp_path: Path) -> None:
    repo = _fresh_copy(tmp_path / "repo")
    env = {**os.environ, "PYTHONPATH": str(repo), "PYTHONUNBUFFERED": "1",
           "PATH": f"{repo / '.venv' / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"}
    cmds = readme_commands((repo / doc).read_text(encoding="utf-8"))
    if not any(c.skip is None for c in cmds):
        pytest.skip(f"{doc}: no command runs here")
    ran: list[str] = []
    with twin_server(time_scale=200.0, log=tmp_path / "twin.log") as url:
        st = _State(repo, env, url)
        for cmd in cmds:
            if cmd.skip is not None:
                continue
            t = time.monotonic()
            argv, proc = _execute(cmd, st)
            print(f"{time.monotonic() - t:6.1f} s  {cmd.text[:150]}", flush=True)
            assert proc.returncode == cmd.expect_rc, (
                f"{cmd.text}\n→ exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
            _check_effects(argv, proc, st)
            ran.append(cmd.text)
    if doc == "README.md":
        assert len(ran) >= 2, ran
