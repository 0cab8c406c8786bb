"""What the default keys cost: CURVE against no keys on this machine's transports.

Starts four real clusters (one gt-dispatcher and one gt-worker each): on
tcp://127.0.0.1:PORT and on ipc://PATH, each once with the user's default key
set (docs/SECURITY.md, "Keys by default": no key flags) and once with
--insecure. Runs transport_bench's client against each in turn, rotating the
order every round so that a change in the machine's load falls on all alike:

  round trip   one small add (4 floats) and its fetch, median of 300
  pipelined    2000 dependent small adds, then one fetch, median of 7
  64 MiB       from_numpy of 64 MiB of float32, then its fetch, median of 7

Prints, per transport and measure, the median over the rounds of each side's
medians and the median of the per-round ratios keys/none (above 1: CURVE is
slower). The keys live in a fresh XDG_CONFIG_HOME, removed at the end.

    PYTHONPATH=build/python /usr/bin/python3 bench/keys_bench.py [rounds]
"""

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from processes import free_port, stop_processes
from transport_bench import BIN, CLIENT, REPO

MEASURES = (("round_trip", "us", 1e6), ("pipelined", "ms", 1e3), ("64MiB", "ms", 1e3))


def start_cluster(endpoint, env, insecure):
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.STDOUT, "env": env}
    flag = ["--insecure"] if insecure else []
    return [subprocess.Popen([str(BIN / "gt-dispatcher"), "--listen", endpoint, *flag], **quiet),
            subprocess.Popen([str(BIN / "gt-worker"), "--connect", endpoint, "--id", "worker-0", *flag], **quiet)]


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    tmp = tempfile.mkdtemp(prefix="gt-keys-bench-")
    env = dict(os.environ, GT_LOCAL_IPC="0", XDG_CONFIG_HOME=tmp)  # explicit endpoints on both sides
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "build" / "python")] +
                                        [p for p in [os.environ.get("PYTHONPATH")] if p])
    endpoints = {}
    for transport in ("tcp", "ipc"):
        for side in ("keys", "none"):
            endpoints[(transport, side)] = (f"tcp://127.0.0.1:{free_port()}" if transport == "tcp" else
                                            f"ipc://{tmp}/{side}.sock")
    procs = []
    try:
        for (_, side), endpoint in endpoints.items():
            procs += start_cluster(endpoint, env, insecure=side == "none")
        time.sleep(1.0)
        results = {name: [] for name in endpoints}
        order = list(endpoints)
        for r in range(rounds):
            for name in order[r % len(order):] + order[:r % len(order)]:
                client_env = dict(env, GT_INSECURE="1" if name[1] == "none" else "0")
                out = subprocess.run([sys.executable, "-c", CLIENT, endpoints[name]], env=client_env,
                                     capture_output=True, text=True, timeout=600)
                if out.returncode != 0:
                    sys.exit(f"client on {endpoints[name]} failed:\n{out.stderr}")
                results[name].append(json.loads(out.stdout.strip().splitlines()[-1]))
                print(f"round {r} {name}: {results[name][-1]}", file=sys.stderr)
        print(f"{rounds} rounds, load average {os.getloadavg()[0]:.2f} at the end, {os.cpu_count()} CPUs")
        print(f"{'transport':<9} {'measure':<12} {'keys (CURVE)':>14} {'none':>14} {'keys/none, per round':>28}")
        for transport in ("tcp", "ipc"):
            for measure, unit, scale in MEASURES:
                keyed, bare = results[(transport, "keys")], results[(transport, "none")]
                cells = [f"{statistics.median(r[measure] * scale for r in side):.1f} {unit}" for side in (keyed, bare)]
                ratios = [k[measure] / b[measure] for k, b in zip(keyed, bare)]
                ratio = f"{statistics.median(ratios):.2f} ({min(ratios):.2f}..{max(ratios):.2f})"
                print(f"{transport:<9} {measure:<12} {cells[0]:>14} {cells[1]:>14} {ratio:>28}")
    finally:
        stop_processes(procs)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
