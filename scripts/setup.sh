#!/usr/bin/env bash
# Installs every Debian package gt needs, only when something is missing.
# Safe to run repeatedly; a no-op on a machine that already has everything.
set -euo pipefail

bash "$(dirname "$0")/setup-npm.sh"   # test-time npm packages for tests/python/test_deploy.py (into build/npm)

packages=(
  build-essential cmake ninja-build ccache pkg-config
  libtorch-dev libopenblas0-pthread
  libprotobuf-dev protobuf-compiler
  prometheus-cpp-dev libyaml-cpp-dev
  libzmq3-dev cppzmq-dev
  libboost-dev libboost-program-options-dev libboost-filesystem-dev libboost-system-dev
  libgloo-dev
  libgtest-dev libgmock-dev
  pybind11-dev python3-dev python3-numpy python3-pytest
  python3-matplotlib  # gt.scripts.visualize: instruction logs as a timeline picture
  python3-torch  # the in-process PyTorch reference for the Python tests and benchmark (same LibTorch 1.13)
  curl prometheus
  clang libfuzzer-14-dev  # libFuzzer targets under tests/fuzz (a short run is part of the tests)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "setup: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
