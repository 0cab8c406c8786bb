"""README.md and dashboards/README.md tell the truth about metrics (issue 40,
item 6): they said gt exports no hot-path, compile-cache or collective metrics,
which it does. Every gt_* metric they name is one docs/METRICS.md declares,
and the families they point to are there."""

import pathlib
import re

REPO = pathlib.Path(__file__).resolve().parents[2]
DECLARED = set(re.findall(r"^\| `(gt_[a-z0-9_]+)`", (REPO / "docs" / "METRICS.md").read_text(), re.M))


def test_metrics_docs_declare_the_families():
    for name in ["gt_hotpath_hot_sequences_total", "gt_compile_cache_hits_total", "gt_compile_cache_misses_total",
                 "gt_backend_unit_runs_total", "gt_backend_unit_compile_seconds_total", "gt_collectives_total",
                 "gt_collective_bytes_total"]:
        assert name in DECLARED, name


def test_readmes_name_only_declared_metrics_and_claim_none_missing():
    for path in [REPO / "README.md", REPO / "dashboards" / "README.md"]:
        text = path.read_text()
        assert "exports no such metrics" not in text and "No gt host or plugin exports" not in text, path
        named = set(re.findall(r"\b(gt_[a-z0-9_]+_(?:total|seconds|bytes|tensors|depth|connected|length))\b", text))
        named = {n for n in named if not n.endswith(("_bucket", "_sum", "_count"))}
        assert named <= DECLARED, (path, sorted(named - DECLARED))
    monitoring = (REPO / "README.md").read_text()
    for name in ["gt_compile_cache_hits_total", "gt_collectives_total", "gt_hotpath_hot_sequences_total"]:
        assert name in monitoring, name
