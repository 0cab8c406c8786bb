"""configs/worker-logged.yaml serves several workers of one machine, as its
header says (issue 40, item 6: it fixed metrics port 9101, so a second worker
started from it could not bind). Two gt-worker processes from the same file,
each with its own --id and log, both run, each serving its own /metrics."""

import os
import pathlib
import subprocess
import time
import urllib.request

import pytest

from conftest import bound_endpoints, first_log_line, stop_processes

REPO = pathlib.Path(__file__).resolve().parents[2]
BIN = pathlib.Path(os.environ.get("GT_BIN_DIR", REPO / "build" / "bin"))


def test_two_workers_share_the_logged_worker_manifest(tmp_path):
    if not (BIN / "gt-dispatcher").exists() or not (BIN / "gt-worker").exists():
        pytest.skip(f"gt-dispatcher / gt-worker not built in {BIN}")
    env = {k: v for k, v in os.environ.items() if k != "GT_INSTRUCTION_LOG"}
    with open(tmp_path / "d.out", "w") as out:
        procs = [subprocess.Popen([str(BIN / "gt-dispatcher"), "--listen", "tcp://127.0.0.1:0", "--metrics", ""],
                                  env=env, stdout=out, stderr=subprocess.STDOUT)]
    try:
        endpoint, _ = bound_endpoints(first_log_line(tmp_path / "d.out", procs[0]))
        assert endpoint
        metrics = []
        for name in ["w0", "w1"]:
            with open(tmp_path / f"{name}.out", "w") as out:
                procs.append(subprocess.Popen(
                    [str(BIN / "gt-worker"), "--manifest", str(REPO / "configs/worker-logged.yaml"),
                     "--connect", endpoint, "--id", name],
                    env={**env, "GT_INSTRUCTION_LOG": str(tmp_path / f"{name}.log")},
                    stdout=out, stderr=subprocess.STDOUT))
            _, where = bound_endpoints(first_log_line(tmp_path / f"{name}.out", procs[-1]))
            assert where and not where.endswith(":0"), where
            metrics.append(where)
        assert metrics[0] != metrics[1]
        time.sleep(1.0)
        assert all(p.poll() is None for p in procs), [(tmp_path / f"{n}.out").read_text() for n in ["w0", "w1"]]
        for name, where in zip(["w0", "w1"], metrics):
            body = urllib.request.urlopen(f"http://{where}/metrics", timeout=10).read().decode()
            assert f'instance="{name}"' in body
            assert "gt_instruction_log_lines_total" in body  # the manifest's logging stage runs
    finally:
        for p in reversed(procs):
            stop_processes([p])
