"""Issue 38 item 4, bytes held, and issue 41 item 1, the torch backend's tensor cache, on a live
process cluster: gt_worker_client_bytes_held follows a client's tensors and the freed tensors the
worker keeps for it, a result of a freed tensor's size reuses it (gt_backend_tensor_cache_hits_total),
and a session's series goes when the session ends."""

from test_cluster import cluster, run_client

MIB = 1 << 20

READ = """
def held():
    out = {}
    for name, h in gt.debug.get_worker_stats().items():
        if h and h["host"] == "worker":
            for s in h["samples"]:
                if s["name"] == "gt_worker_client_bytes_held":
                    out[s["labels"]["client"]] = s["value"]
                elif s["name"] in ("gt_backend_tensor_cache_bytes", "gt_backend_tensor_cache_hits_total"):
                    out[s["name"]] = s["value"]
    return out
"""


def test_bytes_held_follow_tensors_and_kept_storage_and_go_with_the_session():
    with cluster(workers=1) as c:
        got = run_client(c.endpoint, READ + """
a = gt.ones((1024, 1024))
b = a + 1
made = held()
del b
d = a * 2          # b's storage, freed, takes d
reused = held()
del d
kept = held()
labels = [k for k in made if k.startswith("session-")]
say(labels=labels, made=made, reused=reused, kept=kept, value=float((a * 3).sum().item()))
""")
        label = got["labels"][0]
        assert len(got["labels"]) == 1, got
        assert got["made"][label] == 8 * MIB, got["made"]
        assert got["reused"][label] == 8 * MIB, got["reused"]
        assert got["reused"]["gt_backend_tensor_cache_hits_total"] > got["made"]["gt_backend_tensor_cache_hits_total"]
        assert got["kept"][label] == 8 * MIB, "a, and d's storage kept for the client"
        assert got["kept"]["gt_backend_tensor_cache_bytes"] == 4 * MIB, got["kept"]
        assert got["value"] == 3 * 1024 * 1024
        after = run_client(c.endpoint, READ + "say(held=held())\n")
        assert label not in after["held"], after
        assert after["held"]["gt_backend_tensor_cache_bytes"] == 0, "the leaving client's kept storage went"
