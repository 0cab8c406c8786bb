"""gt.scripts.visualize draws the ops where they ran: zoomed to the activity
(not to an axis that starts at the log's OPEN line, long before the first op),
every bar at its WORKER_DONE time less its `took=`, on its worker's lane, and
the legend inside the figure. The logs are written here, in the
instruction_log format (modifiers/instruction_log/README.md), so each op's
time is known exactly."""

import pytest

pytest.importorskip("matplotlib")

from gt.scripts import visualize  # noqa: E402

# The dispatcher's file opened at wall time 1000.0, the worker's at 1000.5;
# the ops come ~100 s later (a script that loaded data first).
DISPATCHER_LOG = """\
   0.000100s | #000000 | OPEN        | dispatcher d0            | -           |          0B | instruction_log host=dispatcher instance=d0 stage=log pid=1 start_unix=1000.000000
   0.010000s | #000001 | CONNECT     | worker w0                | worker      |          0B | index=0
 100.000000s | #000002 | RECV        | client 1                 | matmul      |          0B | matmul #3 result=%3 operands=%1,%2
 100.001000s | #000003 | WORKER_SEND | worker w0                | matmul      |          0B | matmul #3 result=%3 operands=%1,%2 client=1
 100.300000s | #000004 | RECV        | client 1                 | add         |          0B | add #4 result=%4 operands=%3,%3
 100.301000s | #000005 | WORKER_SEND | worker w0                | add         |          0B | add #4 result=%4 operands=%3,%3 client=1
"""
WORKER_LOG = """\
   0.000100s | #000000 | OPEN        | worker w0                | -           |          0B | instruction_log host=worker instance=w0 stage=tape pid=2 start_unix=1000.500000
  99.502000s | #000001 | WORKER_RECV | client 1                 | matmul      |          0B | matmul #3 result=%3 operands=%1,%2
  99.702000s | #000002 | WORKER_DONE | client 1                 | matmul      |          0B | matmul #3 result=%3 operands=%1,%2 status=ok took=0.200000s
  99.802000s | #000003 | WORKER_RECV | client 1                 | add         |          0B | add #4 result=%4 operands=%3,%3
  99.852000s | #000004 | WORKER_DONE | client 1                 | add         |          0B | add #4 result=%4 operands=%3,%3 status=ok took=0.050000s
"""

# op -> (start, width) on the common clock (the dispatcher's OPEN is 0)
RAN = {"matmul": (100.002, 0.2), "add": (100.302, 0.05)}


@pytest.fixture
def trace(tmp_path):
    (tmp_path / "d.log").write_text(DISPATCHER_LOG)
    (tmp_path / "w.log").write_text(WORKER_LOG)
    return visualize.build([str(tmp_path / "d.log"), str(tmp_path / "w.log")])


def test_bars_are_the_worker_ops_on_one_clock(trace):
    assert trace["lanes"] == ["dispatcher d0", "worker w0"]
    bars = {op: (lane, start, width) for lane, start, width, op in trace["bars"]}
    assert set(bars) == set(RAN)
    for op, (start, width) in RAN.items():
        assert bars[op][0] == 1
        assert bars[op][1] == pytest.approx(start, abs=1e-6)
        assert bars[op][2] == pytest.approx(width, abs=1e-9)
    assert visualize.activity_span(trace) == pytest.approx((100.0, 100.352), abs=1e-6)


def test_picture_is_zoomed_to_the_ops_and_the_bars_are_where_they_ran(trace):
    fig, ax = visualize.figure(trace)
    renderer = fig.canvas.get_renderer()
    left, right = ax.get_xlim()
    # Zoomed: the axis spans the activity (100.0 .. 100.352 s) with a small margin, not 0 .. 100.4.
    assert 99.9 < left <= 100.0 and 100.352 <= right < 100.4
    drawn = {}
    for collection in ax.collections:
        for path, colour in zip(collection.get_paths(), collection.get_facecolors()):
            box = path.get_extents()
            if box.width > 0:
                drawn[tuple(colour)] = box
    assert len(drawn) == 2
    axes_box = ax.get_window_extent(renderer)
    for (start, width), box in zip(sorted(RAN.values()), sorted(drawn.values(), key=lambda b: b.x0)):
        # In data coordinates: from WORKER_DONE less took= to WORKER_DONE, on the worker's lane (1).
        assert box.x0 == pytest.approx(start, abs=1e-6) and box.x1 == pytest.approx(start + width, abs=1e-6)
        assert box.y0 == pytest.approx(0.7) and box.y1 == pytest.approx(1.3)
        # On the picture: inside the axes and wide enough to see (the matmul is over half the span).
        (x0, _), (x1, _) = ax.transData.transform([(box.x0, 1), (box.x1, 1)])
        assert axes_box.x0 <= x0 < x1 <= axes_box.x1
        assert (x1 - x0) / axes_box.width > 0.1
    # The legend names both ops and lies inside the figure, clear of the axes.
    assert len(fig.legends) == 1
    legend = fig.legends[0]
    assert sorted(t.get_text() for t in legend.get_texts()) == ["add", "matmul"]
    box = legend.get_window_extent(renderer)
    assert fig.bbox.x0 <= box.x0 and box.x1 <= fig.bbox.x1 and fig.bbox.y0 <= box.y0 and box.y1 <= fig.bbox.y1
    assert box.y1 <= ax.get_tightbbox(renderer).y0 + 1


def test_picture_file_is_written(trace, tmp_path):
    out = tmp_path / "t.svg"
    visualize.draw(trace, str(out))
    assert "<svg" in out.read_text()
