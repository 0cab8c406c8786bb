"""The instruction log's whole-life lines (CONNECT, RECV, WORKER_SEND to a named
worker, WORKER_RECV, WORKER_DONE with its time, SEND, DISCONNECT) from real
gt-dispatcher and gt-worker processes, and gt.scripts.visualize turning those
files into a timeline picture with one lane per host."""

import os
import pathlib
import re
import subprocess
import sys
import time

import pytest

from conftest import bound_endpoints, first_log_line, stop_processes

REPO = pathlib.Path(__file__).resolve().parents[2]
BIN = pathlib.Path(os.environ.get("GT_BIN_DIR", REPO / "build" / "bin"))


def _start_logged_cluster(tmp_path, workers):
    """gt-dispatcher and gt-worker processes, each writing its own instruction
    log (the shipped *-logged.yaml manifests, GT_INSTRUCTION_LOG per process)."""
    if not (BIN / "gt-dispatcher").exists() or not (BIN / "gt-worker").exists():
        pytest.skip(f"gt-dispatcher / gt-worker not built in {BIN}")
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    logs = [tmp_path / "dispatcher.log"] + [tmp_path / f"worker-{i}.log" for i in range(workers)]
    # Port 0, read back from the dispatcher's first line (conftest.bound_endpoints).
    with open(tmp_path / "dispatcher.out", "w") as out:
        procs = [subprocess.Popen([str(BIN / "gt-dispatcher"), "--manifest",
                                   str(REPO / "configs/dispatcher-logged.yaml"), "--listen", "tcp://127.0.0.1:0",
                                   "--metrics", ""], env={**os.environ, "GT_INSTRUCTION_LOG": str(logs[0])},
                                  stdout=out, stderr=subprocess.STDOUT)]
    try:
        endpoint, _ = bound_endpoints(first_log_line(tmp_path / "dispatcher.out", procs[0]))
        assert endpoint, "gt-dispatcher announced no tcp endpoint"
    except BaseException:
        stop_processes(procs)
        raise
    port = int(endpoint.rsplit(":", 1)[1])
    for i in range(workers):
        procs.append(subprocess.Popen([str(BIN / "gt-worker"), "--manifest", str(REPO / "configs/worker-logged.yaml"),
                                       "--connect", endpoint, "--metrics", "", "--id", f"worker-{i}"],
                                      env={**os.environ, "GT_INSTRUCTION_LOG": str(logs[i + 1])}, **quiet))
    # Every worker registered before a client places anything (the dispatcher
    # writes a worker's CONNECT line at once).
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        text = logs[0].read_text() if logs[0].exists() else ""
        if all(f"| worker worker-{i} " in text for i in range(workers)):
            break
        time.sleep(0.05)
    else:
        _stop_workers_first(procs)
        pytest.fail("the workers did not register within 60 s")
    return port, procs, logs


def _stop_workers_first(procs):
    for p in reversed(procs):  # each worker says goodbye while the dispatcher still listens
        stop_processes([p])


def test_logs_show_the_whole_life_and_the_trace_has_a_lane_per_worker(python, tmp_path):
    port, procs, logs = _start_logged_cluster(tmp_path, workers=2)
    try:
        # One client per worker: a new client's tensors go to the next worker.
        for _ in range(2):
            r = python(f"""
import gt
gt.connect('127.0.0.1:{port}')
a = gt.randn(8, 8)
b = gt.randn(8, 8)
print((a @ b).data.numpy().shape)
""")
            assert r.returncode == 0, r.stderr
    finally:
        _stop_workers_first(procs)
    d_log, w0_log, w1_log = (p.read_text() for p in logs)

    # Placement checks grep the way the seed's did: the op and the worker on one line.
    sends = [line for line in d_log.splitlines() if "WORKER_SEND" in line and "| matmul" in line]
    assert {re.search(r"\| worker (worker-\d)", line).group(1) for line in sends} == {"worker-0", "worker-1"}, d_log
    for pattern in [r"\| OPEN +\| dispatcher dispatcher .*start_unix=\d+\.\d+",
                    r"\| CONNECT +\| worker worker-0 ", r"\| CONNECT +\| worker worker-1 ",
                    r"\| CONNECT +\| client \d+ ", r"\| RECV +\| client \d+ +\| matmul ",
                    r"\| SEND +\| client \d+ +\| fetch +\| +\d+B \| fetch #\d+",
                    r"\| DISCONNECT +\| client \d+ .*said goodbye"]:
        assert re.search(pattern, d_log), (pattern, d_log)
    for name, w_log in [("worker-0", w0_log), ("worker-1", w1_log)]:
        assert re.search(rf"\| OPEN +\| worker {name} .*host=worker instance={name} ", w_log), w_log
        assert re.search(r"\| WORKER_RECV \| client \d+ +\| matmul ", w_log), w_log
        assert re.search(r"\| WORKER_DONE \| client \d+ +\| matmul .* status=ok took=\d+\.\d{6}s", w_log), w_log
        assert re.search(r"\| CONNECT +\| dispatcher ", w_log), w_log

    # The picture, through the module's command line as a user runs it.
    out = tmp_path / "trace.png"
    r = subprocess.run([sys.executable, "-m", "gt.scripts.visualize"] + [str(p) for p in logs] + ["-o", str(out)],
                       capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(_package_root()),
                                                                                      os.environ.get("PYTHONPATH")]))})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "lanes: dispatcher dispatcher, worker worker-0, worker worker-1"
    data = out.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 1000


def test_trace_of_the_dispatchers_log_alone_still_has_every_worker(tmp_path):
    """The embedded default logs the dispatcher only: its CONNECT / WORKER_SEND
    lines name the workers, which get lanes (arrows end there) and an SVG."""
    pytest.importorskip("matplotlib")
    from gt.scripts import visualize

    log = tmp_path / "d.log"
    r = subprocess.run([sys.executable, "-c", "import gt\na = gt.randn(4, 4)\nprint((a + a).data.numpy().shape)"],
                       env={**os.environ, "GT_INSTRUCTION_LOG": str(log),
                            "PYTHONPATH": os.pathsep.join(filter(None, [str(_package_root()),
                                                                        os.environ.get("PYTHONPATH")]))},
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    text = log.read_text()
    assert re.search(r"\| WORKER_SEND \| worker embedded-worker-\d+ +\| add ", text), text
    out = tmp_path / "trace.svg"
    lanes = visualize.main([str(log), "-o", str(out)])
    assert lanes[0] == "dispatcher embedded-dispatcher"
    assert [lane for lane in lanes[1:] if lane.startswith("worker embedded-worker-")] == lanes[1:] and len(lanes) >= 2
    assert "<svg" in out.read_text()


def _package_root():
    import gt
    return os.path.dirname(os.path.dirname(os.path.abspath(gt.__file__)))  # not resolved: build/python links
