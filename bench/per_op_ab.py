"""Two worker configurations in one sitting: the torch backend with its tensor cache (the
default, `reuse`) against `tensor_cache_mib: 0` (`aten`: every op ATen's own call, as before
issue 41), each a process cluster of one gt-dispatcher and one gt-worker over TCP loopback.

Each round runs bench/per_op_bench.py (3 rounds of its own) against each cluster, in a fresh client process (the
order alternating between rounds); every figure is a ratio to PyTorch in that same client
process, so a change in the machine's load falls on both sides of it. Prints, per measure, the
median over the rounds of each configuration's ratio and its min..max.

    PYTHONPATH=build/python /usr/bin/python3 bench/per_op_ab.py [rounds] [measure ...]
"""

import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

from processes import free_port, stop_processes

HERE = pathlib.Path(__file__).resolve().parent
BIN = pathlib.Path(os.environ.get("GT_BIN_DIR", HERE.parent / "build" / "bin"))
MANIFEST = """host: worker
id: worker-0
stages: []
backend:
  plugin: torch
  options: {tensor_cache_mib: %d}
"""
CONFIGS = {"reuse": 256, "aten": 0}


def start(name, cache_mib, tmp, procs):
    port, metrics = free_port(), free_port()
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    procs.append(subprocess.Popen([str(BIN / "gt-dispatcher"), "--listen", f"tcp://127.0.0.1:{port}",
                                   "--metrics", f"127.0.0.1:{metrics}"], **quiet))
    path = pathlib.Path(tmp) / f"{name}.yaml"
    path.write_text(MANIFEST % cache_mib)
    procs.append(subprocess.Popen([str(BIN / "gt-worker"), "--manifest", str(path), "--connect",
                                   f"127.0.0.1:{port}", "--id", name], **quiet))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            text = urllib.request.urlopen(f"http://127.0.0.1:{metrics}/metrics", timeout=2).read().decode()
            if any(l.startswith("gt_host_workers_connected") and float(l.split()[-1]) >= 1 for l in text.splitlines()):
                return f"127.0.0.1:{port}"
        except OSError:
            pass
        time.sleep(0.1)
    sys.exit(f"{name}: the worker did not connect within 30 s")


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    measures = sys.argv[2:]
    procs = []
    ratios = {name: {} for name in CONFIGS}
    try:
        with tempfile.TemporaryDirectory(prefix="gt-per-op-ab-") as tmp:
            addresses = {name: start(name, mib, tmp, procs) for name, mib in CONFIGS.items()}
            for r in range(rounds):
                order = list(CONFIGS) if r % 2 == 0 else list(CONFIGS)[::-1]
                for name in order:
                    out = subprocess.run([sys.executable, str(HERE / "per_op_bench.py"), "3", *measures,
                                          "--connect", addresses[name]], capture_output=True, text=True, timeout=600)
                    if out.returncode != 0:
                        sys.exit(f"{name}: client failed:\n{out.stderr}")
                    for measure, result in json.loads(out.stdout.strip().splitlines()[-1])["results"].items():
                        ratios[name].setdefault(measure, []).append(result["ratio"])
    finally:
        stop_processes(procs)
    print(f"gt per-op A/B, process cluster over TCP loopback, {rounds} alternating rounds; ratio to in-process PyTorch")
    print(f"{'measure':12s} " + "  ".join(f"{name:>22s}" for name in CONFIGS))
    for measure in ratios["reuse"]:
        cells = []
        for name in CONFIGS:
            r = ratios[name][measure]
            cells.append(f"{statistics.median(r):6.2f}x ({min(r):.2f}..{max(r):.2f})")
        print(f"{measure:12s} " + "  ".join(f"{c:>22s}" for c in cells))
    print(json.dumps(ratios))


if __name__ == "__main__":
    main()
