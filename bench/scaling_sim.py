"""Past one dispatcher, in simulation (docs/SCALING.md).

A discrete-event simulation of clients, dispatchers and workers, driven by
the costs gt-bench-capacity measured for one dispatcher
(docs/performance/capacity.md). Nothing here runs gt: it asks what a pool of
1,000 workers and 10,000 clients needs of the dispatcher layer, under the
measured cost per instruction and per message.

Model (one event per message, not per instruction):
  client      closed loop, as the benchmark's: `sync_every` batches of
              `batch` instructions, generated at `client_rate` instructions/s
              (its own front end's pace), then a sync; it waits for the
              sync's answer before the next round.
  dispatcher  one thread, FIFO over every message it gets: a batch costs
              msg_us + batch * instr_us, a heartbeat msg_us, a sync
              msg_us + sync_us (the forward to the client's worker), a
              worker's ack ack_us. Clients are partitioned across D
              dispatchers (client i on dispatcher i mod D).
  worker      one thread, FIFO: a batch costs batch * work_us (the op's
              execution; 0 for null workers), a sync is acknowledged at once
              after what came before it. Client i's tensors live on worker
              i mod W (the dispatcher's placement by load spreads them so).
  heartbeats  every client and every worker sends one per heartbeat_ms to
              each dispatcher it talks to (workers shared by D dispatchers
              talk to all D).

Reported per configuration: routed instructions/s, each dispatcher's busy
fraction, sync p50/p99, and the offered load (what the clients would send
if nothing held them back).

    /usr/bin/python3 bench/scaling_sim.py [--seconds S] [--quick]
"""

import argparse
import heapq
import random
import statistics

# Measured on this machine by gt-bench-capacity (docs/performance/capacity.md):
# the dispatcher's CPU per routed instruction at saturation, and per message.
MEASURED = {
    "instr_us": 0.47,  # per instruction routed (batches of 256 and of 16 solved together)
    "msg_us": 2.0,     # per BATCH or HEARTBEAT message, beyond its instructions
    "sync_us": 12.0,   # a sync's message, its forward to the worker and its bookkeeping
    "ack_us": 8.0,     # a worker's SYNC_ACK and the SYNC_DONE it releases
}


class Server:
    """A single thread serving messages in arrival order."""

    def __init__(self):
        self.free_at = 0.0
        self.busy = 0.0

    def serve(self, now, cost):
        start = max(now, self.free_at)
        self.free_at = start + cost
        self.busy += cost
        return self.free_at


def simulate(clients, workers, dispatchers, costs, client_rate, work_us, batch, sync_every, seconds,
             heartbeat_ms=500, shared_workers=True, seed=1):
    """Runs the model for `seconds` of simulated time; returns its figures."""
    rng = random.Random(seed)
    disp = [Server() for _ in range(dispatchers)]
    work = [Server() for _ in range(workers)]
    # Heartbeats: a steady share of every dispatcher's thread (they carry no
    # order), taken out of its capacity.
    hb_peers = clients / dispatchers + (workers if shared_workers else workers / dispatchers)
    hb_share = hb_peers * (1000.0 / heartbeat_ms) * costs["msg_us"] * 1e-6
    if hb_share >= 1:
        return {"routed_per_s": 0, "busy": hb_share, "p50_ms": float("inf"), "p99_ms": float("inf"),
                "offered_per_s": clients * client_rate}
    stretch = 1e-6 / (1 - hb_share)  # us of work -> seconds of a dispatcher's remaining capacity
    batch_cost = (costs["msg_us"] + batch * costs["instr_us"]) * stretch
    sync_cost = (costs["msg_us"] + costs["sync_us"]) * stretch
    ack_cost = costs["ack_us"] * stretch
    gen_time = batch / client_rate
    events = []  # (time, seq, kind, client)
    seq = 0

    def push(t, kind, c):
        nonlocal seq
        seq += 1
        heapq.heappush(events, (t, seq, kind, c))

    for c in range(clients):
        push(rng.random() * gen_time * sync_every, "round", c)
    last_done = [0.0] * clients  # when the client's worker finishes what it was sent
    sync_sent = [0.0] * clients
    routed = 0
    syncs = []
    # Events leave the heap in time order, so each dispatcher serves its
    # messages in arrival order (FIFO). A worker is served in the order its
    # dispatchers route to it, close to arrival order.
    while events:
        t, _, kind, c = heapq.heappop(events)
        if t > seconds:
            break
        d, w = c % dispatchers, c % workers
        if kind == "round":  # the client makes its batches, then a sync
            for k in range(1, sync_every + 1):
                push(t + k * gen_time, "batch", c)
            push(t + sync_every * gen_time, "sync", c)
        elif kind == "batch":
            routed_at = disp[d].serve(t, batch_cost)
            last_done[c] = work[w].serve(routed_at, batch * work_us * 1e-6)
            routed += batch if seconds * 0.25 <= routed_at <= seconds else 0
        elif kind == "sync":
            sync_sent[c] = t
            forwarded = disp[d].serve(t, sync_cost)
            push(max(forwarded, last_done[c]), "ack", c)  # the worker acks after its earlier work
        else:  # the worker's ack reaches the dispatcher, which answers the client
            answered = disp[d].serve(t, ack_cost)
            syncs.append((answered, answered - sync_sent[c]))
            push(answered, "round", c)
    # The first quarter is the ramp (clients start at random within a round).
    window = sorted(lat for end, lat in syncs if seconds * 0.25 <= end <= seconds)
    q = lambda p: window[min(len(window) - 1, int(p * len(window)))] * 1e3 if window else float("inf")
    return {
        "routed_per_s": routed / (seconds * 0.75),
        "busy": min(1.0, max(s.busy for s in disp) / seconds * (1 - hb_share) + hb_share),
        "p50_ms": q(0.50),
        "p99_ms": q(0.99),
        "offered_per_s": clients * client_rate,
    }


def needed_dispatchers(clients, workers, costs, client_rate, batch, sync_every, heartbeat_ms=500,
                       target_busy=0.7):
    """Dispatchers for the offered load at `target_busy` each (analytic)."""
    per_instr = costs["instr_us"] + (costs["msg_us"] / batch)
    per_instr += (costs["msg_us"] + costs["sync_us"] + costs["ack_us"]) / (batch * sync_every)
    load = clients * client_rate * per_instr * 1e-6
    d = 1
    while True:
        hb = (clients / d + workers) * (1000.0 / heartbeat_ms) * costs["msg_us"] * 1e-6
        if load / d + hb <= target_busy:
            return d, load
        d += 1
        if d > 100000:
            return None, load


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=0.0, help="simulated seconds (0: about 12 client rounds)")
    ap.add_argument("--quick", action="store_true", help="a smaller pool (for a smoke run)")
    for k, v in MEASURED.items():
        ap.add_argument("--" + k.replace("_", "-"), type=float, default=v)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--sync-every", type=int, default=4)
    args = ap.parse_args()
    costs = {k: getattr(args, k) for k in MEASURED}
    clients, workers = (1000, 100) if args.quick else (10000, 1000)
    print(f"costs (us): {costs}; batch {args.batch}, sync every {args.sync_every} batches")
    print(f"pool: {clients} clients, {workers} workers (client i on worker i mod {workers}, dispatcher i mod D)\n")
    header = f"{'D':>4} {'workers':>8} {'offered/s':>11} {'routed/s':>11} {'busy':>5} {'p50 ms':>8} {'p99 ms':>9}"
    # Client rates: 1k/s (large ops or compiled units), 10k/s (an eager training loop of mid-size
    # tensors), 100k/s (fine-grained eager ops, near one client's own front-end limit).
    for client_rate, work_us in [(1_000, 20.0), (10_000, 2.0), (100_000, 2.0)]:
        d_need, load = needed_dispatchers(clients, workers, costs, client_rate, args.batch, args.sync_every)
        # About 12 client rounds, whatever the rate (the event count stays bounded).
        seconds = args.seconds or 12 * args.batch * args.sync_every / client_rate
        print(f"client rate {client_rate}/s, worker {work_us} us per instruction: offered load "
              f"{load:.1f} dispatcher-cores; at <= 70% busy each: {d_need} dispatchers ({seconds:.2f} s simulated)")
        print(header)
        for d in sorted({1, max(1, (d_need or 1) // 2), d_need or 1, 2 * (d_need or 1)}):
            for shared in ([True, False] if d == d_need and d > 1 else [True]):
                r = simulate(clients, workers, d, costs, client_rate, work_us, args.batch, args.sync_every, seconds,
                             shared_workers=shared)
                print(f"{d:>4} {'shared' if shared else 'cells':>8} {r['offered_per_s']:>11.0f} "
                      f"{r['routed_per_s']:>11.0f} {r['busy']:>5.2f} {r['p50_ms']:>8.2f} {r['p99_ms']:>9.2f}")
        print()


if __name__ == "__main__":
    main()
