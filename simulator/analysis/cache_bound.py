"""A server's cache reads above what a cold cache could give: a warning, not a figure.

`client_reusable_share` is the client-side bound: the share of each prompt that it
shares with anything sent (or generated) earlier *in this run* — what a perfect prefix
cache starting cold could reuse. A server reporting more than that read blocks it kept
from before the run (a previous run on the same server, another client), so the run's
cache and speed figures are not those of this workload alone.
"""

from __future__ import annotations

from simulator.analysis.metric_keys import SummaryRecord, figure

MARGIN = 0.02       # tokenizers differ (server tokens vs client cl100k estimates)


def cache_bound_warning(s: SummaryRecord) -> str | None:
    """The warning line when server_cache_read_share exceeds client_reusable_share by
    more than MARGIN; None otherwise (or when either is unknown)."""
    server, bound = figure(s, "server_cache_read_share"), figure(s, "client_reusable_share")
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in (server, bound)):
        return None
    assert isinstance(server, int | float) and isinstance(bound, int | float)
    if server <= bound + MARGIN:
        return None
    return (f"the server read {server:.1%} of prompt tokens from its cache, above the "
            f"{bound:.1%} a cold cache could reuse within this run: it kept blocks from "
            "before the run (e.g. a previous run on the same server); start runs cold with "
            "`endurance run --reset-prefix-cache`")
