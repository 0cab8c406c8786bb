#!/usr/bin/env bash
# Every test: install, build, then run the whole ctest suite (GoogleTest
# suites against real gt-dispatcher / gt-worker processes, command checks).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
cd build
ctest --output-on-failure --timeout 600 -j "${GT_TEST_JOBS:-2}"
