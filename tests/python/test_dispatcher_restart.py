"""A dispatcher restart loses nothing (issue 37): real gt-dispatcher and
gt-worker processes (restart_cluster.py), a client process training an MLP
with SGD; the dispatcher is SIGKILLed mid-training and a new one started on
the same address within a second. The client rides through: its losses equal
those of an uninterrupted run on the same cluster (1e-6), the workers hold as
many tensors after the run as before the kill (gt_worker_live_tensors, read
from each worker), and its steps go on within seconds of the new dispatcher
listening. Also: killed during a sync (its real answer comes), killed twice,
data parallel on 2 workers, a 2 x 2 mesh on 4, GT_COMPILE=1, two clients at
once; the grace period running out and a session no worker kept (clear errors
naming what was lost); a kept handle of a failed op.
Skipped when the services are not built (GT_BIN_DIR, else build/bin).
"""

import pathlib
import subprocess
import sys
import time

import numpy as np
import pytest

from restart_cluster import BIN_DIR, RestartCluster, clean_env, go_on, read_until, start_client, step_after

pytestmark = pytest.mark.skipif(not (BIN_DIR / "gt-dispatcher").exists(), reason=f"services not built in {BIN_DIR}")

STEPS, PAUSE = 30, 8
# Loose: the machine running the tests is often loaded; the goal (2 s) is in docs/performance/restart.md.
RESUME_BOUND_S = 20.0


def uninterrupted(cluster, tmp_path, mode, env=None, name="reference"):
    """The losses (and slow value) of a run no dispatcher restart touched, and its live tensors at both pauses."""
    client = start_client(f"127.0.0.1:{cluster.port}", mode, STEPS, PAUSE, tmp_path / f"{name}.err", env)
    try:
        read_until(client, "paused")
        before = cluster.live_tensors()
        go_on(client)
        read_until(client, "paused")
        after = cluster.live_tensors()
        go_on(client)
        end = read_until(client, "losses")[-1]
        assert client.wait(timeout=60) == 0, pathlib.Path(client.stderr_path).read_text()[-3000:]
        return end, before, after
    finally:
        if client.poll() is None:
            client.kill()


def restart(cluster, downtime=0.3):
    """SIGKILLs the dispatcher and starts a new one on its address `downtime` s later; returns when it listens."""
    cluster.kill_dispatcher()
    time.sleep(downtime)
    return cluster.start_dispatcher()


def killed_runs(cluster, tmp_path, specs, kills=1, during_sync=False):
    """Runs one client per (mode, env) of `specs` at once, restarting the dispatcher `kills` times after
    their pause step (while steps run, or, `during_sync`, while the first client's slow sync waits);
    returns, per client, its last line, live tensors (all workers) before the kill and after the run,
    the seconds from each new dispatcher listening to its next step done, and its stderr."""
    clients = [start_client(f"127.0.0.1:{cluster.port}", mode, STEPS, PAUSE, tmp_path / f"killed{i}.err", env)
               for i, (mode, env) in enumerate(specs)]
    try:
        for c in clients:
            read_until(c, "paused")
        before = cluster.live_tensors()
        for c in clients:
            go_on(c)
        resumes = [[] for _ in clients]
        for k in range(kills):
            if during_sync and k == 0:
                read_until(clients[0], "syncing")
                time.sleep(0.2)  # the worker is inside the long chain: the fetch waits
            else:
                for c in clients:
                    read_until(c, "step")
                time.sleep(0.01)
            up = restart(cluster)
            for c, times in zip(clients, resumes):
                times.append(step_after(c, up)["t"] - up)
        for c in clients:
            read_until(c, "paused")
        after = cluster.live_tensors()
        ends = []
        for c in clients:
            go_on(c)
            ends.append(read_until(c, "losses")[-1])
            assert c.wait(timeout=60) == 0, pathlib.Path(c.stderr_path).read_text()[-3000:]
        return [(end, before, after, times, pathlib.Path(c.stderr_path).read_text())
                for end, times, c in zip(ends, resumes, clients)]
    except BaseException:
        print(cluster.log_tail())
        raise
    finally:
        for c in clients:
            if c.poll() is None:
                c.kill()


def killed_run(cluster, tmp_path, mode, env=None, kills=1, during_sync=False):
    return killed_runs(cluster, tmp_path, [(mode, env)], kills, during_sync)[0]


def assert_same_run(reference, killed, cluster):
    ref_end, ref_before, ref_after = reference
    end, before, after, resumes, stderr = killed
    assert len(end["losses"]) == STEPS
    worst = max(abs(a - b) for a, b in zip(end["losses"], ref_end["losses"]))
    assert worst <= 1e-6, (end["losses"], ref_end["losses"], stderr[-2000:])
    assert end["losses"][-1] < end["losses"][0]  # it learns
    # Nothing freed by the restart, nothing leaked by the replay (per worker; which workers a
    # client's whole tensors go to may differ between the two runs, their number may not).
    assert before == after, (before, after, cluster.log_tail())
    assert sum(before.values()) == sum(ref_before.values()) == sum(ref_after.values()), (before, ref_before, ref_after)
    assert "resumed the session" in stderr, stderr[-2000:]
    assert all(r < RESUME_BOUND_S for r in resumes), resumes
    print(f"resume times after the new dispatcher listened: {[round(r, 3) for r in resumes]} s")


@pytest.mark.parametrize("mode, workers, env", [
    ("plain", 1, None),
    ("dp", 2, None),
    ("mesh", 4, None),
    ("plain", 2, {"GT_COMPILE": "1"}),
], ids=["one_worker", "data_parallel_2", "mesh_2x2", "compile"])
def test_killed_dispatcher_mid_training_loses_nothing(tmp_path, mode, workers, env):
    cluster = RestartCluster(tmp_path, workers)
    try:
        reference = uninterrupted(cluster, tmp_path, mode, env)
        assert_same_run(reference, killed_run(cluster, tmp_path, mode, env), cluster)
    finally:
        cluster.stop()


def test_killed_twice_in_a_row(tmp_path):
    cluster = RestartCluster(tmp_path, 2)
    try:
        reference = uninterrupted(cluster, tmp_path, "plain")
        assert_same_run(reference, killed_run(cluster, tmp_path, "plain", kills=2), cluster)
    finally:
        cluster.stop()


def test_killed_during_a_sync_answers_it(tmp_path):
    cluster = RestartCluster(tmp_path, 1)
    try:
        reference = uninterrupted(cluster, tmp_path, "plain", {"SLOW": "1"})
        killed = killed_run(cluster, tmp_path, "plain", {"SLOW": "1"}, during_sync=True)
        assert_same_run(reference, killed, cluster)
        a = np.full((600, 600), 1.0 / 600, np.float32)
        m = a
        for _ in range(60):
            m = (m @ a) * np.float32(1.0001)
        assert killed[0]["slow"] == reference[0]["slow"]
        assert abs(killed[0]["slow"] - float(m.sum())) <= 1e-3 * abs(float(m.sum()))
    finally:
        cluster.stop()


def test_grace_running_out_fails_the_next_sync_naming_what_was_lost(tmp_path):
    # The client gives up 2 s after the loss; its workers free everything 3 s after theirs, then exit.
    cluster = RestartCluster(tmp_path, 1, worker_args=("--reconnect-grace", "3"))
    client = start_client(f"127.0.0.1:{cluster.port}", "plain", STEPS, PAUSE, tmp_path / "client.err",
                          {"GT_RECONNECT_GRACE": "2"})
    try:
        read_until(client, "paused")
        assert sum(cluster.live_tensors().values()) > 0
        cluster.kill_dispatcher()
        started = time.monotonic()
        go_on(client)
        assert client.wait(timeout=60) != 0
        waited = time.monotonic() - started
        stderr = pathlib.Path(client.stderr_path).read_text()
        assert "lost the dispatcher at 127.0.0.1:" in stderr, stderr[-3000:]
        assert "no dispatcher took the session back within GT_RECONNECT_GRACE (2 s)" in stderr, stderr[-3000:]
        assert "its tensors and every instruction since its last sync are lost" in stderr, stderr[-3000:]
        assert 2.0 <= waited < 30.0, waited
        for name, worker in cluster.workers.items():  # --after-grace exit (the default)
            assert worker.wait(timeout=30) is not None, name
    finally:
        if client.poll() is None:
            client.kill()
        cluster.stop()


@pytest.mark.parametrize("specs", [
    [("plain", None), ("plain", {"GT_COMPILE": "1"})],
    [("dp", None), ("plain", {"GT_COMPILE": "1"})],
], ids=["eager_and_compiled", "data_parallel_and_compiled"])
def test_two_clients_ride_through_one_restart(tmp_path, specs):
    # The issue's scenario: two users' training on one cluster, the dispatcher killed under both.
    cluster = RestartCluster(tmp_path, 2)
    try:
        references = [uninterrupted(cluster, tmp_path, mode, env, name=f"reference{i}")
                      for i, (mode, env) in enumerate(specs)]
        runs = killed_runs(cluster, tmp_path, specs)
        for i, (reference, run) in enumerate(zip(references, runs)):
            ref_end, ref_before, ref_after = reference
            end, before, after, resumes, stderr = run
            assert max(abs(a - b) for a, b in zip(end["losses"], ref_end["losses"])) <= 1e-6, (i, stderr[-2000:])
            assert "resumed the session" in stderr, stderr[-2000:]
            assert all(r < RESUME_BOUND_S for r in resumes), resumes
        # Both clients' tensors at once: the two references' counts added up.
        both_before, both_after = runs[0][1], runs[0][2]
        assert both_before == both_after, (both_before, both_after)
        assert sum(both_before.values()) == sum(sum(r[1].values()) for r in references)
    finally:
        cluster.stop()


def test_tensors_on_no_worker_that_came_back_fail_the_next_sync_naming_them(tmp_path):
    # The worker holding the client's tensors does not outlive the dispatcher (no reconnect grace):
    # the new dispatcher cannot give the session back, and says why.
    cluster = RestartCluster(tmp_path, 1, worker_args=("--reconnect-grace", "0"))
    client = start_client(f"127.0.0.1:{cluster.port}", "plain", STEPS, PAUSE, tmp_path / "client.err")
    try:
        read_until(client, "paused")
        old_worker = cluster.workers["worker-0"]
        cluster.kill_dispatcher()
        assert old_worker.wait(timeout=30) is not None  # it freed everything and exited
        cluster.start_dispatcher()
        cluster.add_worker("worker-1", ())
        go_on(client)
        assert client.wait(timeout=60) != 0
        stderr = pathlib.Path(client.stderr_path).read_text()
        assert "lost the dispatcher at 127.0.0.1:" in stderr, stderr[-3000:]
        assert "cannot resume the session: unknown or expired session" in stderr, stderr[-3000:]
    finally:
        if client.poll() is None:
            client.kill()
        cluster.stop()


FAILED_OP_CLIENT = r'''
import json, sys
import numpy as np
import gt
gt.connect(sys.argv[1])
x = gt.from_numpy(np.ones(4, np.float32))
bad = x[gt.tensor(np.array([7]))]  # out of range: fails on the worker, the handle lives on
try:
    bad.numpy()
    print(json.dumps({"error": None}), flush=True)
except gt.Error as e:
    print(json.dumps({"error": str(e)}), flush=True)
sys.stdin.readline()
print(json.dumps({"value": float((x * 2).sum().item())}), flush=True)
'''


def test_a_handle_of_a_failed_op_does_not_block_the_resume(tmp_path):
    # No worker ever made the failed op's result: the new dispatcher must not call it lost.
    cluster = RestartCluster(tmp_path, 1)
    err = tmp_path / "client.err"
    client = subprocess.Popen([sys.executable, "-c", FAILED_OP_CLIENT, f"127.0.0.1:{cluster.port}"], env=clean_env(),
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=open(err, "w"))
    client.stderr_path = err
    try:
        assert "index_select" in read_until(client, "error")[-1]["error"]
        restart(cluster)
        go_on(client)
        assert read_until(client, "value")[-1]["value"] == 8.0
        assert "resumed the session" in err.read_text()
    finally:
        if client.poll() is None:
            client.kill()
        cluster.stop()
