"""Instruction logs as a timeline picture.

    python3 -m gt.scripts.visualize LOG... -o out.png|out.svg

LOG are instruction_log files (modifiers/instruction_log/README.md): the
dispatcher's and the workers'. The picture has one lane per host: the
dispatcher, every worker with a log, and every worker the dispatcher's log
names (CONNECT / WORKER_SEND) even without a log of its own.

- a worker's ops are bars, from WORKER_DONE's end time back by its `took=`
  (an op without a WORKER_DONE line is a tick at its WORKER_RECV);
- the dispatcher's RECV lines are ticks on its lane;
- WORKER_SEND is an arrow from the dispatcher's lane to the named worker's
  lane, ending where that worker logged the instruction (WORKER_RECV) when
  its log is given;
- a collective (broadcast, all_reduce, all_gather) seen by several workers
  is drawn as arrows between their lanes.

Files are put on one clock by the wall time of each file's OPEN line
(`start_unix`); a file without one starts at 0. Prints the lane names, one
line `lanes: a, b, ...`; main() returns them.
"""

import argparse
import re
import sys

COLLECTIVES = {"broadcast", "all_reduce", "all_gather"}
# Arrows beyond this many are left out (a long run has one per instruction).
MAX_ARROWS = 2000

_SEQ = re.compile(r"#(\d+)")
_CLIENT = re.compile(r"\bclient[= ](\d+)")
_TOOK = re.compile(r"took=([0-9.]+)s")
_FIELD = re.compile(r"(\w+)=(\S+)")


class Line:
    __slots__ = ("t", "event", "source", "command", "details")

    def __init__(self, t, event, source, command, details):
        self.t, self.event, self.source, self.command, self.details = t, event, source, command, details

    def seq(self):
        m = _SEQ.search(self.details)
        return int(m.group(1)) if m else None

    def client(self):
        m = _CLIENT.search(self.source) or _CLIENT.search(self.details)
        return int(m.group(1)) if m else None


def parse(path):
    """Returns (lane name, start_unix, [Line]) of one log file."""
    lane, start, lines = None, 0.0, []
    with open(path, encoding="utf-8", errors="replace") as f:
        for raw in f:
            parts = raw.rstrip("\n").split(" | ", 6)
            if len(parts) < 7 or not parts[0].strip().endswith("s"):
                continue
            try:
                t = float(parts[0].strip()[:-1])
            except ValueError:
                continue
            line = Line(t, parts[2].strip(), parts[3].strip(), parts[4].strip(), parts[6])
            if line.event == "OPEN":
                fields = dict(_FIELD.findall(line.details))
                if lane is None:
                    lane = f"{fields.get('host', 'host')} {fields.get('instance', path)}"
                    start = float(fields.get("start_unix", 0.0)) - t
                continue
            lines.append(line)
    return lane or str(path), start, lines


def build(paths):
    """Reads the logs; returns a dict: lanes (names, in order), bars, ticks, arrows."""
    files = [parse(p) for p in paths]
    t0 = min((start for _, start, _ in files if start > 0), default=0.0)
    lanes = []

    def lane_of(name):
        if name not in lanes:
            lanes.append(name)
        return lanes.index(name)

    for name, _, _ in files:  # dispatchers first, then workers in name order
        if name.startswith("dispatcher"):
            lane_of(name)
    for name, _, lines in files:
        if name.startswith("dispatcher"):
            for line in lines:
                if line.source.startswith("worker ") and line.event in ("CONNECT", "WORKER_SEND"):
                    lane_of(line.source)
    for name, _, _ in files:
        lane_of(name)
    lanes[:] = [n for n in lanes if n.startswith("dispatcher")] + sorted(n for n in lanes if not n.startswith("dispatcher"))

    bars, ticks, arrows, received = [], [], [], {}
    collective = {}
    for name, start, lines in files:
        base = (start - t0) if start > 0 else 0.0
        lane = lane_of(name)
        for line in lines:
            t = base + line.t
            key = (line.client(), line.seq(), line.command)
            if line.event == "WORKER_RECV":
                received[(name,) + key] = t
            elif line.event == "WORKER_DONE":
                m = _TOOK.search(line.details)
                took = float(m.group(1)) if m else 0.0
                bars.append((lane, t - took, took, line.command))
                if line.command in COLLECTIVES:
                    collective.setdefault(key, []).append((lane, t - took))
            elif line.event == "RECV":
                ticks.append((lane, t, line.command))
    for name, start, lines in files:
        base = (start - t0) if start > 0 else 0.0
        lane = lane_of(name)
        for line in lines:
            if line.event != "WORKER_SEND" or len(arrows) >= MAX_ARROWS:
                continue
            t = base + line.t
            target = lane_of(line.source)
            end = received.get((line.source, line.client(), line.seq(), line.command), t)
            arrows.append((lane, t, target, end, "send"))
    done_on = {b[0] for b in bars}
    for name, _, lines in files:  # a worker op never completed: a tick at its receipt
        lane = lane_of(name)
        if lane not in done_on:
            for (who, _, _, command), t in received.items():
                if who == name:
                    ticks.append((lane, t, command))
    for members in collective.values():
        members.sort()
        for (a, ta), (b, tb) in zip(members, members[1:]):
            if len(arrows) < 2 * MAX_ARROWS:
                arrows.append((a, ta, b, tb, "collective"))
    return {"lanes": lanes, "bars": bars, "ticks": ticks, "arrows": arrows}


def activity_span(trace):
    """(first, last) time of anything drawn: bars, ticks and arrows. A log's OPEN line and its
    connection set-up come long before the first op, so the picture is zoomed to this span."""
    times = [t for _, start, width, _ in trace["bars"] for t in (start, start + width)]
    times += [t for _, t, _ in trace["ticks"]]
    times += [t for _, ta, _, tb, _ in trace["arrows"] for t in (ta, tb)]
    return (min(times), max(times)) if times else (0.0, 1.0)


def figure(trace):
    """The timeline as a matplotlib (figure, axes), zoomed to the activity, the legend inside the
    figure under the lanes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lanes = trace["lanes"]
    ops = sorted({b[3] for b in trace["bars"]} | {t[2] for t in trace["ticks"]})
    legend_rows = (min(len(ops), 20) + 5) // 6
    fig, ax = plt.subplots(figsize=(12, 1.2 + 0.6 * max(1, len(lanes)) + 0.3 * legend_rows))
    colours = plt.get_cmap("tab20")
    colour = {op: colours(i % 20) for i, op in enumerate(ops)}
    for lane, start, width, op in trace["bars"]:
        ax.broken_barh([(start, max(width, 1e-7))], (lane - 0.3, 0.6), facecolors=colour[op])
    for lane, t, op in trace["ticks"]:
        ax.vlines(t, lane - 0.3, lane + 0.3, colors=[colour[op]], linewidth=0.8)
    for a, ta, b, tb, kind in trace["arrows"]:
        style = {"arrowstyle": "->", "lw": 0.5, "alpha": 0.5,
                 "color": "tab:red" if kind == "collective" else "grey"}
        ax.annotate("", xy=(tb, b), xytext=(ta, a), arrowprops=style)
    first, last = activity_span(trace)
    margin = max(last - first, 1e-6) * 0.02
    ax.set_xlim(first - margin, last + margin)
    ax.set_yticks(range(len(lanes)))
    ax.set_yticklabels(lanes)
    ax.set_ylim(len(lanes) - 0.5, -0.5)
    ax.set_xlabel("seconds since the first log opened")
    ax.set_title("gt instruction log timeline")
    handles = [plt.Rectangle((0, 0), 1, 1, color=colour[op]) for op in ops[:20]]
    legend_height = 0.0
    if handles:  # under the axes, inside the figure: tight_layout leaves it room
        fig.legend(handles, ops[:20], loc="lower center", ncol=min(6, len(handles)), fontsize="small", frameon=False)
        legend_height = (0.3 * legend_rows + 0.1) / fig.get_figheight()
    fig.tight_layout(rect=(0, legend_height, 1, 1))
    return fig, ax


def draw(trace, out):
    import matplotlib.pyplot as plt

    fig, _ = figure(trace)
    fig.savefig(out)
    plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python3 -m gt.scripts.visualize", description=__doc__.split("\n")[0])
    parser.add_argument("logs", nargs="+", help="instruction_log files (dispatcher's and workers')")
    parser.add_argument("-o", "--output", required=True, help="picture to write: .png or .svg")
    args = parser.parse_args(argv)
    trace = build(args.logs)
    draw(trace, args.output)
    print("lanes: " + ", ".join(trace["lanes"]))
    return trace["lanes"]


if __name__ == "__main__":
    try:
        main()
    except OSError as e:
        print(f"visualize: {e}", file=sys.stderr)
        sys.exit(1)
