#!/usr/bin/env bash
# The main job: install, build, and run the demo on the embedded default
# (a dispatcher and two workers inside the demo process).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
./build/bin/gt-demo
