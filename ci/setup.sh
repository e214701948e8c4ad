#!/usr/bin/env bash
# One-time setup for worldlab: venv, torch for this machine, worldlab + extras, the OS
# library open3d needs, Chromium for the browser checks, and the Jupyter kernel `worldlab`.
# Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python

if [ ! -x "$PY" ]; then
  echo "[setup] creating .venv"
  python3 -m venv .venv
fi
"$PY" -m pip install -q --upgrade pip

# torch first: the CPU build on machines without CUDA (an unpinned torch would pull a
# multi-GB CUDA build). On a GPU machine, install your CUDA torch before `make`.
if ! "$PY" -c "import torch" 2>/dev/null; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi >/dev/null 2>&1; then
    echo "[setup] NVIDIA GPU found: installing the default (CUDA) torch build"
    "$PY" -m pip install -q "torch>=2.4,<3"
  else
    echo "[setup] no GPU: installing the CPU build torch==2.13.0"
    "$PY" -m pip install -q torch==2.13.0
  fi
fi

# open3d needs libusb-1.0 at import time.
if ! ldconfig -p 2>/dev/null | grep -q "libusb-1.0.so.0"; then
  if [ "$(id -u)" = "0" ]; then
    echo "[setup] installing libusb-1.0-0 (needed by open3d)"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libusb-1.0-0) >/dev/null
  else
    echo "[setup] open3d needs the OS library libusb-1.0-0. Run:"
    echo "    sudo apt-get install -y libusb-1.0-0"
    echo "then run make again."
    exit 1
  fi
fi

# Chromium for make test's browser checks (ci/browser_checks.py drives Debian's build through
# playwright; playwright's own browser download is never used). Optional: without root the
# checks say why they are skipped and everything else still runs.
if [ ! -x /usr/bin/chromium ]; then
  if [ "$(id -u)" = "0" ]; then
    echo "[setup] installing chromium (make test's browser checks)"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) \
      >/dev/null || echo "[setup] could not install chromium: the browser checks will be skipped"
  else
    echo "[setup] no Chromium: make test will skip its browser checks (to run them:"
    echo "    sudo apt-get install -y chromium)"
  fi
fi

echo "[setup] installing worldlab and its dependencies"
"$PY" -m pip install -q -e ".[test,browser]"
"$PY" -m ipykernel install --sys-prefix --name worldlab --display-name "worldlab" >/dev/null
# JupyterLab in .venv opens quietly: open3d's dependency dash ships an old-style lab
# extension that would pop up "Build Recommended" (nothing needs building: we use no dash
# widget), and the news/update notification is off. Files in ci/jupyter/.
mkdir -p .venv/etc/jupyter/labconfig .venv/share/jupyter/lab/settings
cp ci/jupyter/page_config.json .venv/etc/jupyter/labconfig/page_config.json
cp ci/jupyter/overrides.json .venv/share/jupyter/lab/settings/overrides.json
touch .venv/.worldlab-installed
echo "[setup] done: kernel 'worldlab' registered in .venv"
