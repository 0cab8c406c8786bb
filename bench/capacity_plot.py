"""The capacity benchmark's CSV (gt-bench-capacity --csv) as a Markdown
table and a PNG plot (routed instructions/s, sync p99 and the dispatcher's
CPU per instruction against clients, one line per worker count).

    /usr/bin/python3 bench/capacity_plot.py capacity.csv docs/performance/capacity.png
"""

import csv
import sys


def load(path):
    with open(path) as f:
        return [r for r in csv.DictReader(f)]


def table(rows):
    lines = ["| clients | workers | routed instr/s | sync p50 ms | sync p99 ms | dispatcher CPU | workers CPU "
             "| clients CPU | dispatcher µs/instr |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['clients']} | {r['workers']} | {float(r['routed_per_second']):,.0f} | "
                     f"{float(r['sync_p50_ms']):.1f} | {float(r['sync_p99_ms']):.1f} | "
                     f"{float(r['dispatcher_cpu']):.2f} | {float(r['workers_cpu']):.2f} | "
                     f"{float(r['clients_cpu']):.2f} | {float(r['dispatcher_us_per_instruction']):.2f} |"
                     + (f" {r['error']}" if r.get("error") else ""))
    return "\n".join(lines)


def plot(rows, png):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (left, right, cost) = plt.subplots(1, 3, figsize=(15, 4.2))
    for w in sorted({int(r["workers"]) for r in rows}):
        mine = sorted((r for r in rows if int(r["workers"]) == w), key=lambda r: int(r["clients"]))
        x = [int(r["clients"]) for r in mine]
        left.plot(x, [float(r["routed_per_second"]) / 1e3 for r in mine], marker="o", label=f"{w} workers")
        right.plot(x, [float(r["sync_p99_ms"]) for r in mine], marker="o", label=f"{w} workers")
        cost.plot(x, [float(r["dispatcher_us_per_instruction"]) for r in mine], marker="o", label=f"{w} workers")
    for ax in (left, right, cost):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("clients (own sessions)")
        ax.grid(True, alpha=0.3)
    left.set_ylabel("routed instructions/s (thousands)")
    left.set_title("One dispatcher, null workers")
    right.set_yscale("log")
    right.set_ylabel("sync p99 (ms)")
    right.set_title("Sync latency (4 batches of 256 in flight per client)")
    cost.set_ylabel("dispatcher CPU µs per routed instruction")
    cost.set_ylim(bottom=0)
    cost.set_title("Dispatcher CPU per instruction")
    cost.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=110)


def main():
    rows = load(sys.argv[1])
    print(table(rows))
    if len(sys.argv) > 2:
        plot(rows, sys.argv[2])


if __name__ == "__main__":
    main()
