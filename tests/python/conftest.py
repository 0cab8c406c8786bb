"""Shared helpers for the gt Python tests.

The tests run against the embedded default (`import gt`; the first op
starts a dispatcher and workers inside the pytest process). Tests that
need a fresh process (env vars read at start, gpu_workers) run a
subprocess with the same interpreter and PYTHONPATH.
"""

import os
import subprocess
import sys
import zlib

import numpy as np
import pytest

import gt


@pytest.fixture
def rng(request):
    # A different, reproducible stream per test.
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


def run_python(code, env=None, cwd=None, timeout=120):
    """Runs `code` in a fresh interpreter (this one, this PYTHONPATH); returns the CompletedProcess."""
    full_env = dict(os.environ)
    # The gt package this process imported, by absolute path (cwd may change).
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(gt.__file__)))
    full_env["PYTHONPATH"] = os.pathsep.join([package_root] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-c", code], env=full_env, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture
def python():
    return run_python


@pytest.fixture(autouse=True)
def _clean_state():
    yield
    gt.clear_configs()
    gt.set_grad_enabled(True)
