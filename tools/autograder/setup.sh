#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image (the zip unpacked in /autograder/source).
# Pick Gradescope's Ubuntu 24.04 base image (Python 3.12): the pins in constraints.txt need Python 3.11 or newer.
# As root with apt-get it installs Python and bubblewrap first; otherwise (CI, a shell) it uses the python3 on PATH.
set -euo pipefail
cd "$(dirname "$0")"
export DEBIAN_FRONTEND=noninteractive
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  apt-get update -qq
  apt-get install -y -qq python3 python3-venv python3-pip >/dev/null
  apt-get install -y -qq bubblewrap >/dev/null || echo "setup.sh: no bubblewrap; run_autograder reports every notebook \"not graded\" (FASTPATH_ISOLATION=auto grades without the sandbox)" >&2
else
  echo "setup.sh: not root, or no apt-get: using the python3 on PATH (3.11 or newer, with venv); without bubblewrap, grade with FASTPATH_ISOLATION=auto" >&2
fi
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
# the CPU build of torch (PyPI's Linux torch is the multi-GB CUDA build); grading runs in Triton's interpreter.
# FASTPATH_TORCH_INDEX names another index (as for ./kit); where the index cannot be reached, the pinned torch comes
# from pip's own index settings with the rest (PIP_INDEX_URL and pip.conf are honoured as usual).
TORCH=$(grep -E '^torch==' constraints.txt)
INDEX=${FASTPATH_TORCH_INDEX:-cpu}
[ "$INDEX" != cpu ] || INDEX=https://download.pytorch.org/whl/cpu
if ! .venv/bin/python -m pip install -q --retries 1 --timeout 30 --index-url "$INDEX" "$TORCH"; then
  echo "setup.sh: could not install $TORCH from $INDEX; going on with pip's own index settings" >&2
fi
.venv/bin/python -m pip install -q -c constraints.txt -e . nbclient nbformat ipykernel jupyter_client markdown-it-py
