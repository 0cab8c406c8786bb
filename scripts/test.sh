#!/usr/bin/env bash
# Every test: install, build, then run the whole ctest suite (GoogleTest
# suites against real gt-dispatcher / gt-worker processes, command checks)
# and the libFuzzer targets for a few seconds each.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
cd build
ctest --output-on-failure --timeout 600 -j "${GT_TEST_JOBS:-2}"
# The libFuzzer targets, briefly: their regression inputs, then a few seconds
# each from the seeds (docs/FUZZING.md; scripts/fuzz.sh --long is the real run).
cd ..
bash scripts/fuzz.sh "${GT_FUZZ_SECONDS:-5}"
