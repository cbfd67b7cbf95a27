"""Write a SYNTHETIC team day of Claude Code telemetry, as an OpenTelemetry Collector's
file exporter writes it, for the docs' end-to-end example (docs/team-telemetry.md):
import, replay and size. No real telemetry: sessions start around a morning peak,
each a growing conversation (an 18k-token system + tools prefix read from the cache,
a few hundred to a few thousand tokens added per request), tool runs and think time
between requests, a quarter with a sub-agent stream.

    python -m benchmarks.team_day --out /tmp/endurance-team-day [--sessions 80] [--proto]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tests.otel_export import team_day, write_json_logs, write_proto_logs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="folder to write into")
    ap.add_argument("--sessions", type=int, default=80)
    ap.add_argument("--seed", type=int, default=52)
    ap.add_argument("--proto", action="store_true", help="format: proto instead of json")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    day = team_day(a.seed, a.sessions, requests=(10, 40))
    path = (write_proto_logs(a.out / "logs.pb", day, batch=200) if a.proto
            else write_json_logs(a.out / "logs.jsonl", day, batch=200))
    print(f"{path}: {len(day.requests):,} requests, {len(day.tools):,} tool runs, "
          f"{len(day.prompts):,} prompts in {a.sessions} sessions (SYNTHETIC)")


if __name__ == "__main__":
    main()
