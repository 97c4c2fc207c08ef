#!/usr/bin/env bash
# Fresh-machine setup: a virtualenv in .venv with a pinned CPU torch installed FIRST (so nothing can
# resolve a newer torch and pull CUDA wheels), then reasonrl with its dev and test extras, and the
# bubblewrap binary that the code sandbox uses. Safe to re-run; does nothing once done.
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

stamp=.venv/.reasonrl-installed
if [ -f "$stamp" ] && [ "$stamp" -nt pyproject.toml ]; then
  exit 0
fi
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q "$TORCH_SPEC"
.venv/bin/python -m pip install -q -e '.[dev,gym]'
# some packages drag in torchvision, which has no CPU build here and breaks transformers' imports
.venv/bin/python -m pip uninstall -y -q torchvision >/dev/null 2>&1 || true
.venv/bin/python -c "import torch, transformers, reasonrl; print('setup: torch', torch.__version__, '| transformers', transformers.__version__)"
touch "$stamp"
