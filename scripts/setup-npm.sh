#!/usr/bin/env bash
# Installs the test-time npm packages of tests/deploy/package.json (the
# Kubernetes API schemas that tests/python/test_deploy.py validates
# deploy/kubernetes/*.yaml against) into build/npm, or $GT_NPM_DIR.
#
# Exactly the versions of tests/deploy/package-lock.json (npm ci), into a
# directory git ignores (build/), so nothing of node_modules lands in the
# tree. Safe to run repeatedly: a no-op when that lock file is installed
# already. Installs Debian's nodejs and npm first when npm is missing (any
# node >= 14.6 does: kubernetes-models 4.x, not 5.x, which wants node 22,
# because Debian 12 ships node 18). Checked by command, not by package: a
# nodejs from elsewhere (e.g. NodeSource's, which bundles npm and conflicts
# with Debian's npm package) counts.
set -euo pipefail
cd "$(dirname "$0")/.."

src=tests/deploy
dest=${GT_NPM_DIR:-build/npm}

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "setup-npm: node/npm not found and no apt-get to install them; test_deploy will skip its Kubernetes schema checks" >&2
    exit 0
  fi
  echo "setup-npm: installing nodejs npm"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends nodejs npm
fi

# The stamp is the lock file that was installed: a changed lock (a version
# bump) installs again, an unchanged one does nothing.
stamp="$dest/.installed-package-lock.json"
if [ -d "$dest/node_modules" ] && cmp -s "$src/package-lock.json" "$stamp"; then
  exit 0
fi

echo "setup-npm: installing $src/package.json into $dest"
mkdir -p "$dest"
cp "$src/package.json" "$src/package-lock.json" "$dest/"
# --ignore-scripts: no package here needs an install script, and none should
# run. No audit or funding requests: an offline-ish, quiet, repeatable install.
(cd "$dest" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
cp "$src/package-lock.json" "$stamp"
