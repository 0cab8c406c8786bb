"""The debug switches (docs/DEBUGGING.md): GT_VERBOSE and GT_DEBUG_{CLIENT,
DISPATCHER,WORKER,COMPILE} make their part print what it does to stderr
(gt/log.h), nothing is printed without them, and the lines are rate-limited.
Each case runs a fresh interpreter: the switches are read once at start."""

import math
import re

import pytest

from conftest import run_python

SWITCHES = ["GT_VERBOSE", "GT_DEBUG_CLIENT", "GT_DEBUG_DISPATCHER", "GT_DEBUG_WORKER", "GT_DEBUG_COMPILE"]

# A few ops, repeated so that the compile stages find a hot sequence.
SCRIPT = """
import gt
a, b = gt.randn(8, 8), gt.randn(8, 8)
for _ in range(6):
    c = ((a + b) * a).relu()
    c.numpy()
print("ok")
"""

# What each part must print on the embedded default (a regex each).
EXPECTED = {
    "client": [r"gt:client \+\d+\.\d+s connected to the embedded cluster", r"gt:client .* sent a batch of \d+ instructions",
               r"gt:client .* sync \d+ \(fetch #\d+\) waited [\d.e-]+ ms, 0 errors"],
    "dispatcher": [r"gt:dispatcher .*: worker embedded-worker-0 registered", r"gt:dispatcher .*: client \d+ connected",
                   r"gt:dispatcher .*: batch of \d+ instructions from client", r"gt:dispatcher .* place add #\d+ of client \d+ on embedded-worker-0",
                   r"gt:dispatcher .*: batch of \d+ instructions to worker embedded-worker-0"],
    "worker": [r"gt:worker .* embedded-worker-0: registering with", r"gt:worker .* embedded-worker-0: batch of \d+ instructions",
               r"gt:worker .* embedded-worker-0: ran add #\d+ of client \d+ in [\d.e-]+ ms"],
    "compile": [r"gt:compile .* hot sequence \d+ found", r"gt:compile .* cache miss: unit \d+", r"gt:compile .* cache hit: unit \d+"],
}

PARTS = {"GT_DEBUG_CLIENT": ["client"], "GT_DEBUG_DISPATCHER": ["dispatcher"], "GT_DEBUG_WORKER": ["worker"],
         "GT_DEBUG_COMPILE": ["compile"], "GT_VERBOSE": ["client", "dispatcher", "worker", "compile"]}

BASE_ENV = {"GT_WORKERS": "1", "GT_COMPILE": "1", **{v: "" for v in SWITCHES}}


def _run(env, script=SCRIPT):
    r = run_python(script, env={**BASE_ENV, **env})
    assert r.returncode == 0, r.stderr
    return r


@pytest.mark.parametrize("variable", SWITCHES)
def test_switch_prints_its_part_only(variable):
    r = _run({variable: "1"})
    assert "ok" in r.stdout
    on = PARTS[variable]
    for part, patterns in EXPECTED.items():
        for pattern in patterns:
            found = re.search(pattern, r.stderr) is not None
            assert found == (part in on), f"{variable}: {pattern!r} {'missing' if part in on else 'unexpected'}:\n{r.stderr}"
    assert "gt:" not in "\n".join(l for l in r.stderr.splitlines() if not any(l.startswith(f"gt:{p} ") for p in on))


def test_nothing_without_a_switch():
    r = _run({})
    assert r.stderr.strip() == "", r.stderr
    r = _run({"GT_DEBUG_WORKER": "0", "GT_VERBOSE": "0"})
    assert "gt:" not in r.stderr, r.stderr


def test_lines_are_rate_limited():
    script = """
import time
import gt
start = time.monotonic()
a = gt.randn(2, 2)
for _ in range(3000):
    a = a + 1
a.numpy()
print(time.monotonic() - start)
"""
    r = _run({"GT_DEBUG_WORKER": "1", "GT_COMPILE": ""}, script)
    elapsed = float(r.stdout.strip())
    lines = [l for l in r.stderr.splitlines() if l.startswith("gt:worker ")]
    ran = [l for l in lines if ": ran add #" in l]
    # At most 100 lines a second (gt::log::kLinesPerSecond); 3000 ops ran.
    assert len(lines) <= 100 * (math.ceil(elapsed) + 2), f"{len(lines)} lines in {elapsed:.2f} s"
    assert len(ran) < 3000
    suppressed = [int(m.group(1)) for m in re.finditer(r"gt:worker .* \.\.\. (\d+) lines suppressed", r.stderr)]
    assert suppressed and sum(suppressed) + len(ran) >= 3000 - 5, r.stderr[-2000:]


def test_process_cluster_hosts_log(python, processes, tmp_path):
    log = tmp_path / "hosts.log"
    env = {"GT_DEBUG_DISPATCHER": "1", "GT_DEBUG_WORKER": "1"}
    with processes(workers=1, env=env, log=log) as port:
        r = python(f"""
import gt
gt.connect('127.0.0.1:{port}')
a = gt.randn(4, 4)
print((a + a).numpy().shape)
""", env={v: "" for v in SWITCHES})
        assert r.returncode == 0, r.stderr
        assert "gt:" not in r.stderr  # the client's process has no switch on
    text = log.read_text()
    for pattern in [r"gt:dispatcher .*: worker worker-0 registered", r"gt:dispatcher .*: client \d+ connected",
                    r"gt:dispatcher .* place add #\d+ of client \d+ on worker-0",
                    r"gt:dispatcher .*: batch of \d+ instructions to worker worker-0",
                    r"gt:worker .* worker-0: registered as worker #0", r"gt:worker .* worker-0: ran add #\d+ of client \d+ in"]:
        assert re.search(pattern, text), f"{pattern!r} missing:\n{text}"
