"""Profiles are parsed once per text (a run loads the same files many times): each caller
still gets its own copy, and a file whose text changed is parsed again."""

from __future__ import annotations

from pathlib import Path

import yaml

from simulator.twin.model import profiles
from simulator.twin.model.profiles import PROFILE_DIR, load_engine_settings, load_hardware


def test_a_cached_parse_is_a_fresh_copy_each_time() -> None:
    first = profiles._read_yaml(PROFILE_DIR / "engine.yaml")
    first["max_num_seqs"] = -1                       # a caller changing its copy …
    first.clear()
    again = profiles._read_yaml(PROFILE_DIR / "engine.yaml")
    assert again == yaml.safe_load((PROFILE_DIR / "engine.yaml").read_text())
    assert load_engine_settings(load_hardware("a40")) == load_engine_settings(load_hardware("a40"))


def test_a_changed_file_is_parsed_again(tmp_path: Path) -> None:
    p = tmp_path / "p.yaml"
    p.write_text("a: 1\n")
    assert profiles._read_yaml(p) == {"a": 1}
    p.write_text("a: 2\n")                           # same size, same path, maybe same mtime
    assert profiles._read_yaml(p) == {"a": 2}
