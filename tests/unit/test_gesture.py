"""static/js/contract/gesture.js in Node on landmark sets: MediaPipe's own Python solution on the real
hand photos, then the same hands rotated, mirrored, scaled, and edited into other poses
(thumb tucked into a fist, index finger pointing, fingers of an open palm folded). One Node
process classifies all."""
from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

from harness import node
from tests.hand_poses import FROM_PALM, index_angle, mirror, point_index, rotate, thumb_angle, tuck_thumb
from harness.node import js_url
from harness.paths import JS
from harness.photos import HAND_GESTURES, mediapipe_hands

GESTURE_JS = JS / "contract/gesture.js"
OPPOSITE = {"thumbs_up": "thumbs_down", "thumbs_down": "thumbs_up"}
# Gestures whose answer does not depend on which way the hand is turned in the picture.
TURN_FREE = ("victory", "open_palm", "closed_fist", "iloveyou", "none")

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")

# Reads {cases: [{id, points, world?, hold?}], sequences: [{id, n, frames: [{points, world?}]}],
# tracked: [{id, n, frames: [[{key, points}, ...], ...]]}} on stdin; prints {id: gesture},
# {id: [stable gesture per frame]} and {id: [[stable gesture per hand] per frame]}.
RUNNER = """
import {classifyGesture, GestureStabilizer, GestureTracker} from %s;
const cases = {};
for (const c of req.cases) cases[c.id] = classifyGesture(c.points, {world: c.world || null, hold: c.hold || 'none'}).gesture;
const sequences = {};
for (const s of req.sequences) {
  const st = new GestureStabilizer({frames: s.n});
  sequences[s.id] = s.frames.map((f) => st.update(f.points, f.world || null).gesture);
}
const tracked = {};
for (const s of req.tracked || []) {
  const tracker = new GestureTracker({frames: s.n});
  tracked[s.id] = s.frames.map((hands) => tracker.update(hands).map((g) => g.gesture));
}
process.stdout.write(JSON.stringify({cases, sequences, tracked}));
""" % js_url(GESTURE_JS)


def run_node(cases: list[dict], sequences: list[dict] = (), tracked: list[dict] = ()) -> dict:
    return node.run_node(RUNNER, {"cases": cases, "sequences": list(sequences), "tracked": list(tracked)},
                            timeout=60)


def hand_sets() -> dict[str, dict]:
    """Every photo's MediaPipe hand (full; lite too where MediaPipe's lite finds it)."""
    sets = {}
    for name in HAND_GESTURES:
        for variant in ("full", "lite"):
            hands = mediapipe_hands(name, variant)
            if hands:
                assert len(hands) == 1, (name, variant, len(hands))
                sets[f"{name}:{variant}"] = {"photo": name, "image": hands[0]["image"], "world": hands[0]["world"]}
    return sets


@pytest.fixture(scope="module")
def cases():
    """All landmark cases: id -> (points, world or None, expected gesture or None to skip)."""
    out = {}
    for key, hand in hand_sets().items():
        expected = HAND_GESTURES[hand["photo"]]
        image, world = hand["image"], hand["world"]
        for mode in ("2d", "world"):
            def add(tag, img, wld, want, hold="none", mode=mode, key=key):
                pts = img[:, :2] if mode == "2d" else img
                out[f"{key}:{mode}:{tag}"] = (pts, wld if mode == "world" else None, want, hold)

            add("as-is", image, world, expected)
            add("mirrored", mirror(image), mirror(world), expected)
            add("scaled-0.2", image * 0.2 + 7, world, expected)
            add("scaled-5", image * 5 - 300, world * 5, expected)
            for deg in range(-180, 181, 15):
                if deg == 0:
                    continue
                img_r, wld_r = rotate(image, deg), rotate(world, deg, centre=np.zeros(2))
                angle = thumb_angle(img_r)
                if expected in TURN_FREE:
                    want = expected
                elif expected == "pointing_up":
                    pointing = index_angle(img_r)
                    if 45 < pointing < 60:
                        continue       # between the enter cone and the hold cone
                    want = "pointing_up" if pointing < 45 else "none"
                elif angle < 45 or angle > 135:
                    want = "thumbs_up" if angle < 45 else "thumbs_down"
                elif 75 < angle < 105:
                    want = "none"      # thumb sideways: neither
                else:
                    continue           # between the cones: either answer is defensible
                add(f"rot{deg:+d}", img_r, wld_r, want)
                add(f"rot{deg:+d}-mirrored", mirror(img_r), mirror(wld_r), want)
            if expected in OPPOSITE:
                add("rot180", rotate(image, 180), rotate(world, 180, centre=np.zeros(2)), OPPOSITE[expected])
                add("thumb-tucked", tuck_thumb(image), tuck_thumb(world), "closed_fist")
                add("thumb-tucked-mirrored", mirror(tuck_thumb(image)), mirror(tuck_thumb(world)), "closed_fist")
                pointed = point_index(image)
                if not 40 < index_angle(pointed) < 65:
                    add("index-pointing", pointed, point_index(world),
                        "pointing_up" if index_angle(pointed) < 45 else "none")
            if expected == "open_palm":
                for pose, make in FROM_PALM.items():
                    for deg in (0, -30, 30, 180):
                        img_r, wld_r = rotate(make(image), deg), rotate(make(world), deg, centre=np.zeros(2))
                        want = pose
                        if pose == "pointing_up" and index_angle(img_r) > 45:
                            if index_angle(img_r) < 60:
                                continue    # between the enter cone and the hold cone
                            want = "none"   # pointing sideways or down
                        add(f"palm-made-{pose}{deg:+d}", img_r, wld_r, want)
                        add(f"palm-made-{pose}{deg:+d}-mirrored", mirror(img_r), mirror(wld_r), want)
    return out


@pytest.fixture(scope="module")
def verdicts(cases):
    payload = [{"id": cid, "points": np.asarray(p).tolist(), "world": None if w is None else np.asarray(w).tolist(),
                "hold": hold} for cid, (p, w, _, hold) in cases.items()]
    return run_node(payload)["cases"]


def test_real_photos_as_mediapipe_sees_them(cases, verdicts):
    """The untouched MediaPipe landmarks of every photo give the photo's gesture (2-D points
    alone, and with world landmarks), full model; lite where MediaPipe's lite finds the hand."""
    as_is = {cid: (verdicts[cid], want) for cid, (_, _, want, _) in cases.items() if cid.endswith(":as-is")}
    assert len(as_is) >= 2 * len(HAND_GESTURES), sorted(as_is)
    wrong = {cid: got for cid, (got, want) in as_is.items() if got != want}
    # down_1 seen by the lite model: its 2-D landmarks put the fingers straight (the model is
    # wrong there, as an overlay shows); the world landmarks read the fist right.
    allowed = {"down_1.jpg:lite:2d:as-is"}
    assert set(wrong) <= allowed, wrong


@pytest.mark.parametrize("transform", ["mirrored", "scaled", "rot", "thumb-tucked", "index-pointing", "palm-made"])
def test_transformed_hands(cases, verdicts, transform):
    chosen = {cid: c for cid, c in cases.items() if f":{transform}" in cid
              and not cid.startswith("down_1.jpg:lite:2d")}
    assert chosen
    wrong = {cid: (verdicts[cid], want) for cid, (_, _, want, _) in chosen.items() if verdicts[cid] != want}
    assert not wrong, f"{len(wrong)}/{len(chosen)} wrong: {dict(list(wrong.items())[:8])}"


def test_hysteresis_keeps_a_shown_gesture_in_the_band():
    """A thumb tilted between the enter cone (55 deg) and the hold cone (65 deg): not a new
    thumbs-up, but a thumbs-up already shown stays."""
    hand = mediapipe_hands("up_3.jpg")[0]
    tilt = 60 - thumb_angle(hand["image"])
    tilted = rotate(hand["image"], tilt)
    assert abs(thumb_angle(tilted) - 60) < 0.5
    got = run_node([{"id": "fresh", "points": tilted.tolist()},
                    {"id": "held", "points": tilted.tolist(), "hold": "thumbs_up"}])["cases"]
    assert got == {"fresh": "none", "held": "thumbs_up"}


def test_stabilizer_needs_consecutive_frames_and_does_not_flicker():
    up = mediapipe_hands("up_3.jpg")[0]["image"].tolist()
    palm = mediapipe_hands("none_2.jpg")[0]["image"].tolist()
    frames = [up] * 5 + [palm] + [up] * 3 + [palm, palm] + [up] + [palm] * 4
    got = run_node([], [{"id": "s", "n": 3, "frames": [{"points": f} for f in frames]}])["sequences"]["s"]
    assert got == (["none", "none"] + ["thumbs_up"] * 3      # up after 3 frames in a row
                   + ["thumbs_up"] * 4                        # one stray palm frame: ignored
                   + ["thumbs_up"] * 3                        # two stray frames, then up again: still up
                   + ["thumbs_up", "thumbs_up", "open_palm", "open_palm"])  # three palms in a row: palm


def test_tracker_keeps_each_hand_through_a_flipped_handedness_label():
    """Two hands: a thumbs-up and an open palm side by side. The up hand's label flips for a
    frame (as MediaPipe's handedness sometimes does): its gesture stays; so does the palm's."""
    up = mediapipe_hands("up_3.jpg")[0]["image"]
    palm = mediapipe_hands("none_2.jpg")[0]["image"]
    palm = palm * (np.ptp(up[:, 1]) / np.ptp(palm[:, 1]))   # same size,
    palm[:, 0] += up[:, 0].max() - palm[:, 0].min() + 200     # to the right of the up hand
    palm[:, 1] += up[:, 1].mean() - palm[:, 1].mean()

    def hands(up_key):
        return [{"key": up_key, "points": up.tolist()}, {"key": "Right", "points": palm.tolist()}]

    frames = [hands("Left")] * 4 + [hands("Right")] + [hands("Left")] * 2
    got = run_node([], tracked=[{"id": "t", "n": 3, "frames": frames}])["tracked"]["t"]
    assert [g[0] for g in got] == ["none", "none"] + ["thumbs_up"] * 5
    assert [g[1] for g in got] == ["none", "none"] + ["open_palm"] * 5


def test_rejects_wrong_input():
    proc = subprocess.run(["node", "--input-type=module", "-e",
                           f"import {{classifyGesture}} from {js_url(GESTURE_JS)};"
                           "try {{ classifyGesture([[0, 0]]); }} catch (e) {{ console.log(e.message); }}"],
                          capture_output=True, text=True, timeout=30, check=True)
    assert "21 landmarks" in proc.stdout
