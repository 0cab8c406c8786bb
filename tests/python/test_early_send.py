"""The client sends the first heavy op after a sync point at once (client/src/session_issue.cc,
RoughWork): the idle worker starts on it while the rest of the step is issued. Later heavy ops,
and light ones, wait for their batch as before. The batches sent are read from the client's
debug log (GT_DEBUG_CLIENT: "sent a batch of N instructions"); the results are compared with
PyTorch's in the same process."""

import json
import re
import textwrap

from conftest import run_python

PROGRAM = textwrap.dedent("""
    import json
    import numpy as np
    import torch
    import gt

    rng = np.random.default_rng(0)
    small = [rng.standard_normal((64, 64)).astype(np.float32) for _ in range(2)]
    big = [rng.standard_normal((512, 512)).astype(np.float32) for _ in range(2)]

    # Light ops only: one batch at the sync.
    x, y = gt.from_numpy(small[0]), gt.from_numpy(small[1])
    z = x
    for _ in range(20):
        z = z + y
    light = z.numpy()
    del z

    # Two matmuls of 512^3 multiply-adds each: the first goes out with what
    # precedes it (2 from_numpy and the matmul); the second waits for the sync.
    a, b = gt.from_numpy(big[0]), gt.from_numpy(big[1])
    c = a @ b
    d = c @ b
    heavy = d.numpy()

    ta, tb = torch.from_numpy(big[0]), torch.from_numpy(big[1])
    tz = torch.from_numpy(small[0])
    for _ in range(20):
        tz = tz + torch.from_numpy(small[1])
    print(json.dumps({"light_equal": bool(np.array_equal(light, tz.numpy())),
                      "heavy_equal": bool(np.array_equal(heavy, ((ta @ tb) @ tb).numpy()))}))
    gt.shutdown()
""")


def batch_sizes(stderr):
    return [int(n) for n in re.findall(r"sent a batch of (\d+) instructions", stderr)]


def test_the_first_heavy_op_after_a_sync_is_sent_at_once_and_light_ops_wait():
    done = run_python(PROGRAM, env={"GT_DEBUG_CLIENT": "1", "GT_WORKERS": "1", "GT_COMPILE": "0"})
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result == {"light_equal": True, "heavy_equal": True}, result
    sizes = batch_sizes(done.stderr)
    # The light loop: 2 from_numpy, 20 adds, the 19 frees of the tensors it
    # replaced, the fetch and the sync, in one batch. Then the free of its
    # last tensor, the two from_numpy and the first matmul, sent before the
    # second matmul was issued. Then the second matmul, the fetch, the sync.
    assert sizes == [43, 4, 3], (sizes, done.stderr[-2000:])
