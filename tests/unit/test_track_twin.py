"""static/js/contract/track.js (Node) against modelcontract/track.py on the same detections: the same
tracks with the same IDs, boxes and trails, the same line and zone counts, frame by frame, on
synthetic scenes with jitter, missed detections, weak scores and clutter, some taken every few
frames (a live page that fell behind: the tracker is told the steps); and the JS assignment
solver against scipy's on random cost matrices."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import linear_sum_assignment

from modelcontract import track
from harness.node import js_url, run_node
from harness.paths import JS
from harness.track_scenes import scene

RUNNER = """
const {Tracker, LineCounter, zoneCounts, linearAssignment} = await import(%s);
const scenes = req.scenes.map((s) => {
  const tracker = new Tracker(s.options);
  const line = new LineCounter(...s.line);
  return s.frames.map((dets, i) => {
    const tracks = tracker.update(dets, s.steps[i]);
    return {tracks, line: structuredClone(line.update(tracks)), zone: zoneCounts(s.zone, tracks)};
  });
});
const assignments = req.costs.map((c) => linearAssignment(c));
process.stdout.write(JSON.stringify({scenes, assignments}));
""" % js_url(JS / "contract/track.js")

CASES = [({}, seed) for seed in range(12)] + [
    ({"confirm": 3, "max_lost": 5}, 100),
    ({"high": 0.3, "low": 0.05, "birth": 0.4}, 101),
    ({"confirm": 1, "trail": 4}, 102),
]
# Scenes taken every 1 to 6 frames, as a page that falls behind takes them.
SKIPPING = [({}, 200), ({"confirm": 3, "max_lost": 5}, 201)]
LINE = ([320.0, 0.0], [320.0, 480.0])
ZONE = [[100.0, 100.0], [500.0, 80.0], [540.0, 400.0], [80.0, 380.0]]


def python_run(frames, options, steps):
    tracker, line = track.Tracker(**options), track.LineCounter(*LINE)
    out = []
    for dets, n in zip(frames, steps):
        tracks = tracker.update(dets, n)
        out.append({"tracks": tracks, "line": {k: dict(v) for k, v in line.update(tracks).items()},
                    "zone": track.zone_counts(ZONE, tracks)})
    return out


@pytest.fixture(scope="module")
def twin():
    rng = np.random.default_rng(7)
    costs = [rng.uniform(0, 1, size=(int(rng.integers(1, 9)), int(rng.integers(1, 9)))).tolist() for _ in range(40)]
    scenes = [{"frames": scene(seed, objects=8), "options": options,
               "line": LINE, "zone": ZONE} for options, seed in CASES]
    for scene_ in scenes:
        scene_["steps"] = [1] * len(scene_["frames"])
    for options, seed in SKIPPING:
        every = scene(seed, frames=240, objects=8)
        taken = np.cumsum(np.random.default_rng(seed).integers(1, 7, size=60))
        taken = [0] + [int(f) for f in taken if f < len(every)]
        scenes.append({"frames": [every[f] for f in taken], "steps": [1] + np.diff(taken).tolist(),
                       "options": options, "line": LINE, "zone": ZONE})
    return scenes, costs, run_node(RUNNER, {"scenes": scenes, "costs": costs})


@pytest.mark.parametrize("case", range(len(CASES) + len(SKIPPING)))
def test_js_tracker_gives_the_python_tracks_and_counts(twin, case):
    scenes, _, got = twin
    options = scenes[case]["options"]
    want = python_run(scenes[case]["frames"], options, scenes[case]["steps"])
    js = got["scenes"][case]
    assert len(js) == len(want)
    crossings = 0
    for f, (a, b) in enumerate(zip(js, want)):
        assert [t["id"] for t in a["tracks"]] == [t["id"] for t in b["tracks"]], f
        for ta, tb in zip(a["tracks"], b["tracks"]):
            assert (ta["class_id"], ta["label"], ta["score"], ta["box"]) == (tb["class_id"], tb["label"], tb["score"],
                                                                            tb["box"]), f
            np.testing.assert_allclose(ta["trail"], tb["trail"], atol=1e-6, rtol=0)
        assert a["line"] == b["line"] and a["zone"] == b["zone"], f
        crossings = sum(c["in"] + c["out"] for c in b["line"].values())
    # The scenes exercise what is compared: tracks, crossings and a zone.
    assert max(t["id"] for f in want for t in f["tracks"]) >= 4
    assert crossings > 0 and any(f["zone"] for f in want)


def test_js_assignment_is_the_least_cost_one(twin):
    _, costs, got = twin
    for cost, pairs in zip(costs, got["assignments"]):
        cost = np.asarray(cost)
        rows, cols = linear_sum_assignment(cost)
        assert len(pairs) == min(cost.shape)
        assert len({i for i, _ in pairs}) == len({j for _, j in pairs}) == len(pairs)
        assert sum(cost[i, j] for i, j in pairs) == pytest.approx(cost[rows, cols].sum(), abs=1e-9)
