"""bench.track on its synthetic MOT sequence with the real YOLOv5n: four people cut out of
bus.jpg walking in three lanes (two passing each other, one hiding the other) keep their IDs
(0 switches), the line counts equal the ground truth's, and motmetrics' MOTA and IDF1 are
high; the ground-truth reader keeps only the rows MOT17 says to consider. Speed is the
bench's to print, not this test's."""
from __future__ import annotations

import pytest

from bench import track as bench_track
from harness.paths import YOLOV5N_WEIGHTS

pytestmark = pytest.mark.skipif(not YOLOV5N_WEIGHTS.is_file(), reason="shared yolov5n.pt is absent")


@pytest.fixture(scope="module")
def sequence(tmp_path_factory):
    return bench_track.make_sequence(tmp_path_factory.mktemp("mot") / "walkers", frames=150)


def test_the_synthetic_sequence_is_tracked_without_switches_and_counted_exactly(built_model, sequence):
    result = bench_track.evaluate(sequence, built_model("yolov5n", weights=str(YOLOV5N_WEIGHTS)))
    assert result["frames"] == 150 and result["gt_objects"] == 4
    assert result["id_switches"] == 0, result
    assert result["tracks"] == 4, result
    assert result["line_counts"] == result["gt_line_counts"] and result["gt_line_counts"], result
    assert result["mota"] >= 0.9 and result["idf1"] >= 0.9, result


def test_ground_truth_rows_not_to_consider_are_left_out(tmp_path):
    gt = tmp_path / "gt.txt"
    gt.write_text("1,1,10,20,30,40,1,1,1\n1,2,50,60,10,10,0,1,1\n2,1,12,20,30,40,1,1,1\n")
    assert bench_track.read_gt(gt) == {1: [(1, [10.0, 20.0, 30.0, 40.0])], 2: [(1, [12.0, 20.0, 30.0, 40.0])]}
