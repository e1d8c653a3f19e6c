#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image (the zip unpacked in /autograder/source).
# Pick Gradescope's Ubuntu 24.04 base image (Python 3.12): the pins in constraints.txt need Python 3.11 or newer.
set -euo pipefail
cd "$(dirname "$0")"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq python3 python3-venv python3-pip >/dev/null
apt-get install -y -qq bubblewrap >/dev/null || echo "setup.sh: no bubblewrap; the learner's kernel runs unisolated" >&2
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
# the CPU build of torch (PyPI's Linux torch is the multi-GB CUDA build); grading runs in Triton's interpreter
TORCH=$(grep -E '^torch==' constraints.txt)
.venv/bin/python -m pip install -q --index-url https://download.pytorch.org/whl/cpu "$TORCH"
.venv/bin/python -m pip install -q -c constraints.txt -e . nbclient nbformat ipykernel jupyter_client
