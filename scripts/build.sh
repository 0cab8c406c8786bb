#!/usr/bin/env bash
# Installs what is missing and builds gt into ./build (Ninja, ccache if present).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
# LibTorch translation units need ~1.5 GB each; two jobs fit every machine we run on.
ninja -C build -j "${GT_BUILD_JOBS:-2}"
