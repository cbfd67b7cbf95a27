#!/usr/bin/env bash
# Install the peer load generators that benchmarks/client_ceiling.py compares against,
# each into its own venv (never into the project's .venv):
#
#   ${ENDURANCE_PEERS:-$HOME/.cache/endurance-peers}/aiperf    NVIDIA AIPerf
#   ${ENDURANCE_PEERS:-$HOME/.cache/endurance-peers}/guidellm  GuideLLM (+ CPU torch)
#
# Idempotent: a venv whose pinned version already imports is left alone. Neither tests
# nor CI run this; the benchmark uses a peer only when its venv is there.
#
#   bash benchmarks/install_peers.sh            # both
#   bash benchmarks/install_peers.sh guidellm   # one
set -euo pipefail

AIPERF_VERSION=0.13.0
GUIDELLM_VERSION=0.8.1
# GuideLLM requires torch (unpinned) and imports it for its data loader. Unpinned, pip
# takes a CUDA build of several GB; install this CPU release first so it satisfies
# the requirement. Override with TORCH_SPEC if your machine has another CPU wheel.
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}

ROOT=${ENDURANCE_PEERS:-$HOME/.cache/endurance-peers}
PY=${PYTHON:-python3}
mkdir -p "$ROOT"

have() {  # have NAME VERSION: venv exists and has exactly that version
    local venv="$ROOT/$1"
    [[ -x "$venv/bin/python" ]] &&
        [[ "$("$venv/bin/python" -c "import importlib.metadata as m; print(m.version('$1'))" \
               2>/dev/null)" == "$2" ]]
}

fresh_venv() {
    rm -rf "$1"
    "$PY" -m venv "$1"
    "$1/bin/python" -m pip install -q --upgrade pip
}

install_aiperf() {
    if have aiperf "$AIPERF_VERSION"; then echo "aiperf $AIPERF_VERSION: already installed"; return; fi
    echo "aiperf $AIPERF_VERSION: installing into $ROOT/aiperf"
    fresh_venv "$ROOT/aiperf"
    "$ROOT/aiperf/bin/python" -m pip install -q "aiperf==$AIPERF_VERSION"
    if "$ROOT/aiperf/bin/python" -m pip show torch >/dev/null 2>&1; then
        echo "warning: aiperf pulled in torch" >&2
    fi
}

install_guidellm() {
    if have guidellm "$GUIDELLM_VERSION"; then echo "guidellm $GUIDELLM_VERSION: already installed"; return; fi
    echo "guidellm $GUIDELLM_VERSION: installing into $ROOT/guidellm"
    fresh_venv "$ROOT/guidellm"
    "$ROOT/guidellm/bin/python" -m pip install -q "$TORCH_SPEC"
    if ! "$ROOT/guidellm/bin/python" -c "import torch, sys; sys.exit(torch.version.cuda is not None)" \
            2>/dev/null; then
        echo "error: $TORCH_SPEC is a CUDA build here; set TORCH_SPEC to a CPU wheel" >&2
        exit 1
    fi
    "$ROOT/guidellm/bin/python" -m pip install -q "guidellm==$GUIDELLM_VERSION"
    "$ROOT/guidellm/bin/python" -c "import torch, sys; sys.exit(torch.version.cuda is not None)" ||
        { echo "error: guidellm replaced the CPU torch with a CUDA build" >&2; exit 1; }
}

targets=("$@")
[[ ${#targets[@]} -eq 0 ]] && targets=(aiperf guidellm)
for t in "${targets[@]}"; do
    case "$t" in
        aiperf) install_aiperf ;;
        guidellm) install_guidellm ;;
        *) echo "unknown peer: $t (aiperf, guidellm)" >&2; exit 2 ;;
    esac
done
for t in "${targets[@]}"; do
    "$ROOT/$t/bin/$t" --version 2>/dev/null | head -1 || true
done
