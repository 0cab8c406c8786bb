"""gt.debug.get_worker_stats() / print_worker_stats(): against the embedded
default in this process, and against real gt-dispatcher / gt-worker
processes whose dispatcher runs the hotpath and compile stages (a client in
a fresh interpreter, since a process connects once).
"""

import io
import json
import os
import pathlib
import socket
import subprocess
import textwrap
import time

import pytest

import gt

REPO = pathlib.Path(__file__).resolve().parents[2]

DISPATCHER_MANIFEST = """\
host: dispatcher
id: dispatcher
heartbeat_interval_ms: 200
stages:
  - name: hotpath
    plugin: hotpath
    options: {threshold: 2}
  - name: compile
    plugin: compile
"""


def test_embedded_default_reports_the_dispatcher_then_every_worker():
    a = gt.randn(8, 8)
    (a @ a).sum().item()
    hosts = gt.debug.get_worker_stats()
    names = list(hosts)
    assert names[0] == "embedded-dispatcher"
    workers = int(os.environ.get("GT_WORKERS", "2"))
    assert sorted(names[1:]) == [f"embedded-worker-{i}" for i in range(workers)]
    dispatcher = hosts["embedded-dispatcher"]
    assert dispatcher["host"] == "dispatcher"
    assert dispatcher["stages"][-1] == "router"
    assert dispatcher["instructions"] > 0
    assert sum(h["instructions"] for h in list(hosts.values())[1:]) > 0
    received = [s for s in dispatcher["samples"] if s["name"] == "gt_stage_instructions_received_total"
                and s["labels"]["stage"] == dispatcher["stages"][0]]
    assert [s["value"] for s in received] == [dispatcher["instructions"]]


def test_print_worker_stats_has_a_line_per_host():
    gt.randn(4).sum().item()
    out = io.StringIO()
    gt.debug.print_worker_stats(file=out)
    lines = out.getvalue().splitlines()
    assert lines[0].split()[:3] == ["host", "kind", "instructions"]
    hosts = gt.debug.get_worker_stats()
    assert [line.split()[0] for line in lines[1:1 + len(hosts)]] == list(hosts)


def test_a_non_positive_timeout_is_refused():
    with pytest.raises(ValueError, match="timeout"):
        gt.debug.get_worker_stats(timeout=0)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_hot_step_compiled_through_real_processes(python, tmp_path):
    bin_dir = pathlib.Path(os.environ.get("GT_BIN_DIR", REPO / "build" / "bin"))
    dispatcher, worker = bin_dir / "gt-dispatcher", bin_dir / "gt-worker"
    if not (dispatcher.exists() and worker.exists()):
        pytest.skip(f"gt-dispatcher / gt-worker not built in {bin_dir}")
    manifest = tmp_path / "dispatcher.yaml"
    manifest.write_text(DISPATCHER_MANIFEST)
    endpoint = f"tcp://127.0.0.1:{_free_port()}"
    procs = [subprocess.Popen([str(dispatcher), "--listen", endpoint, "--manifest", str(manifest)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)]
    try:
        procs.append(subprocess.Popen([str(worker), "--connect", endpoint, "--id", "worker-0"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT))
        time.sleep(0.5)
        # Each step frees its temporaries before its sync point: one hotpath
        # candidate per step, the same signature every time.
        code = textwrap.dedent(f"""\
            import io, json
            import gt
            gt.connect('{endpoint}')
            x = gt.randn(16, 8)
            w = gt.randn(8, 4)
            gt.sync()
            for _ in range(5):
                y = (x @ w).relu().sum()
                del y
                gt.sync()
            table = io.StringIO()
            gt.debug.print_worker_stats(file=table)
            print(json.dumps({{"stats": gt.debug.get_worker_stats(), "table": table.getvalue()}}))
            """)
        result = python(code, timeout=60)
        assert result.returncode == 0, result.stderr
        out = json.loads(result.stdout)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(timeout=10)
    stats = out["stats"]
    assert list(stats) == ["dispatcher", "worker-0"]
    d, w = stats["dispatcher"], stats["worker-0"]
    assert d["stages"] == ["hotpath", "compile", "router"]
    assert len(d["hot_sequences"]) == 1
    step = d["hot_sequences"][0]
    assert step["repetitions"] == 5
    assert step["length"] >= 4
    # Threshold 2: steps 2-5 were marked and each ran as one unit, defined once.
    assert d["units_run"] == 4
    assert d["cache_misses"] == 1
    assert d["cache_hits"] == d["units_run"] - d["cache_misses"]
    assert d["compiled"] == 4 * step["length"]
    assert w["unit_runs"] == 4
    assert w["unit_cache_misses"] == 1
    assert w["compile_seconds"] > 0
    assert sum(w["unit_instructions"].values()) == d["compiled"]
    table = out["table"]
    assert table.splitlines()[1].split()[:2] == ["dispatcher", "dispatcher"]
    assert f"dispatcher/hotpath  {step['id']}  length {step['length']}  x5" in table
