#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz, docs/FUZZING.md) into build-fuzz/
# with clang, then runs each for a while on its seed corpus and regression
# inputs. Exits non-zero when a regression input fails or a target finds a
# crash, leak or timeout (the input is then in build-fuzz/artifacts/TARGET/).
#
#   scripts/fuzz.sh                    every target, 5 s each (GT_FUZZ_SECONDS)
#   scripts/fuzz.sh 60 codec manifest  these targets, 60 s each
#   scripts/fuzz.sh --long             every target, 30 min each: the long run
#
# A run starts from the checked-in seeds (tests/fuzz/corpus/TARGET/) and
# regressions, so that a short one takes the time asked for. A long run (or
# GT_FUZZ_KEEP_CORPUS=1) also keeps what it learns in build-fuzz/corpus/TARGET/
# and starts from it the next time.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${GT_FUZZ_SECONDS:-5}"
keep="${GT_FUZZ_KEEP_CORPUS:-0}"
if [ "${1:-}" = "--long" ]; then
  seconds=1800
  keep=1
  shift
elif [[ "${1:-}" =~ ^[0-9]+$ ]]; then
  seconds="$1"
  shift
fi
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(codec manifest signal_config dispatcher)

# Only gt_fuzz is built: the targets, the libraries they run and the plugins
# the dispatcher target loads (no LibTorch).
if [ ! -f build-fuzz/build.ninja ]; then
  CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DGT_FUZZ=ON -DGT_WERROR=OFF \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
mkdir -p build-fuzz/logs
if ! ninja -C build-fuzz -j "${GT_BUILD_JOBS:-2}" gt_fuzz >build-fuzz/logs/build.log 2>&1; then
  tail -40 build-fuzz/logs/build.log >&2
  echo "fuzz: build failed (build-fuzz/logs/build.log)" >&2
  exit 1
fi

export UBSAN_OPTIONS="print_stacktrace=1:${UBSAN_OPTIONS:-}"

# libFuzzer flags of one target: its dictionary, and for the dispatcher (a
# thread of its own allocates between inputs, so per-input leak checks would
# misfire; leaks still fail the run at exit) a longer timeout.
flags_of() {
  local dict="tests/fuzz/dict/$1.dict"
  if [ "$1" = dispatcher ]; then echo -n "-timeout=30 -detect_leaks=0"; else echo -n "-timeout=10"; fi
  if [ -f "$dict" ]; then echo -n " -dict=$dict"; fi
  echo
}

# Every checked-in regression input must pass before any fuzzing.
run_regressions() {
  local t="$1" bin="build-fuzz/fuzz/gt_fuzz_$1" dir="tests/fuzz/regressions/$1"
  [ -d "$dir" ] && [ -n "$(ls -A "$dir")" ] || return 0
  # shellcheck disable=SC2046
  "$bin" $(flags_of "$t") "$dir"/* >"build-fuzz/logs/$t.regressions.log" 2>&1
}

failed=()
printf '%-14s %12s %8s %10s %8s  %s\n' target executions seconds exec/s corpus result
for t in "${targets[@]}"; do
  bin="build-fuzz/fuzz/gt_fuzz_$t"
  [ -x "$bin" ] || { echo "fuzz: no target '$t' (codec, manifest, signal_config, dispatcher)" >&2; exit 2; }
  log="build-fuzz/logs/$t.log"
  corpus_dir="build-fuzz/corpus/$t"
  [ "$keep" = 1 ] || { corpus_dir="build-fuzz/scratch/$t"; rm -rf "$corpus_dir"; }
  mkdir -p "$corpus_dir" "build-fuzz/artifacts/$t"
  if ! run_regressions "$t"; then
    failed+=("$t")
    printf '%-14s %12s %8s %10s %8s  %s\n' "$t" - - - - "REGRESSION (build-fuzz/logs/$t.regressions.log)"
    continue
  fi
  dirs=("$corpus_dir" "tests/fuzz/corpus/$t")
  [ -d "tests/fuzz/regressions/$t" ] && dirs+=("tests/fuzz/regressions/$t")
  start=$(date +%s)
  status=0
  # shellcheck disable=SC2046
  "$bin" $(flags_of "$t") -max_total_time="$seconds" -print_final_stats=1 \
    -artifact_prefix="build-fuzz/artifacts/$t/" "${dirs[@]}" >"$log" 2>&1 || status=$?
  elapsed=$(($(date +%s) - start))
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
  corpus=$(sed -n 's/^#[0-9]*.*DONE .* corp: \([0-9]*\).*/\1/p' "$log" | tail -1)
  result=ok
  if [ "$status" -ne 0 ]; then
    failed+=("$t")
    result="FAILED ($log; input in build-fuzz/artifacts/$t/)"
  fi
  printf '%-14s %12s %8s %10s %8s  %s\n' "$t" "${runs:-?}" "$elapsed" "${rate:-?}" "${corpus:-?}" "$result"
done

if [ ${#failed[@]} -gt 0 ]; then
  for t in "${failed[@]}"; do
    echo "---- $t" >&2
    grep -h -m1 -A30 -E 'ERROR|runtime error|fuzz check failed|SUMMARY' \
      "build-fuzz/logs/$t.log" "build-fuzz/logs/$t.regressions.log" 2>/dev/null | head -40 >&2 || true
  done
  echo "fuzz: failed: ${failed[*]}" >&2
  exit 1
fi
