"""Your own gestures: static/js/contract/custom_gestures.js in Node against its Python twin
(modelcontract/custom_gestures.py) on real hands (MediaPipe on the photos) moved about, the
match's rules (turn, size, place and mirror free; a far hand matches nothing), the set's
limits, and the same verdict on the same bad files."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from modelcontract import custom_gestures as cg
from modelcontract.custom_gestures import GESTURE_SETS as SETS
from modelcontract.example_sets import ExampleFileError
from harness import node
from tests.hand_poses import FROM_PALM, mirror, rotate
from harness.node import js_url
from harness.paths import JS
from harness.photos import mediapipe_hands

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")

RUNNER = """
import * as cg from %s;
const out = {vectors: [], matches: [], files: [], added: null};
const sets = cg.GESTURE_SETS;
for (const h of req.hands) out.vectors.push(cg.normaliseHand(h.points, h.handedness));
for (const q of req.queries) out.matches.push(sets.match(cg.normaliseHand(q.points, q.handedness), req.set));
for (const f of req.files) {
  try { sets.parse(f); out.files.push('ok'); } catch (e) { out.files.push(e.message); }
}
const errors = [];
let set = sets.empty();
for (const [name, n] of req.adds) {
  try { set = sets.add(set, name, Array(n).fill(out.vectors[0])); } catch (e) { errors.push(e.message); }
}
out.added = {counts: set.classes.map((g) => [g.name, g.examples.length]), errors};
process.stdout.write(JSON.stringify(out));
""" % js_url(JS / "contract/custom_gestures.js")


def run_node(hands=(), queries=(), gesture_set=None, files=(), adds=()) -> dict:
    return node.run_node(RUNNER, {"hands": list(hands), "queries": list(queries), "files": list(files),
                                     "set": gesture_set or SETS.validate(gesture_file([])),
                                     "adds": list(adds)}, timeout=60)


def gesture_file(classes: list) -> dict:
    return {"format": SETS.format, "version": 1, "classes": classes}


def hand(name: str) -> dict:
    h = mediapipe_hands(name)[0]
    # MediaPipe labels a mirrored picture: the person's hand is the other one (as the page).
    return {"points": h["image"][:, :2].tolist(), "handedness": {"Left": "Right", "Right": "Left"}[h["handedness"]]}


def moved(h: dict, deg: float, scale: float, shift: float, flip: bool) -> dict:
    p = rotate(h["points"], deg) * scale + shift
    handedness = h["handedness"]
    if flip:
        p = mirror(p)
        handedness = {"Left": "Right", "Right": "Left"}[handedness]
    return {"points": p.tolist(), "handedness": handedness}


@pytest.fixture(scope="module")
def hands():
    palm = hand("none_2.jpg")
    out = {"up": hand("up_3.jpg"), "down": hand("down_1.jpg"), "palm": palm}
    out["victory"] = {"points": FROM_PALM["victory"](palm["points"]).tolist(), "handedness": palm["handedness"]}
    return out


def recorded_set(hands) -> dict:
    """Three of your gestures, each recorded as 8 slightly different frames."""
    rng = np.random.default_rng(3)
    gestures = []
    for name in ("up", "palm", "victory"):
        h = hands[name]
        frames = [{"points": (np.asarray(h["points"]) + rng.normal(0, 1.5, (21, 2))).tolist(),
                   "handedness": h["handedness"]} for _ in range(8)]
        gestures.append({"name": f"my {name}", "examples": [cg.normalise_hand(f["points"], f["handedness"])
                                                            for f in frames]})
    return SETS.validate(gesture_file(gestures))


def test_normalised_hands_equal_the_twin_and_ignore_turn_size_place_and_mirror(hands):
    base = hands["palm"]
    variants = [moved(base, deg, scale, shift, flip) for deg in (0, 40, -120, 180) for scale in (0.3, 2.5)
                for shift in (0, 300) for flip in (False, True)]
    js = run_node(hands=variants)["vectors"]
    reference = np.asarray(cg.normalise_hand(base["points"], base["handedness"]))
    for v, got in zip(variants, js):
        ours = cg.normalise_hand(v["points"], v["handedness"])
        assert np.allclose(ours, got, rtol=0, atol=1e-12)
        assert np.abs(np.asarray(ours) - reference).max() < 1e-9
    # Middle-finger MCP straight up at one palm length.
    assert reference[16:18] == pytest.approx([0.0, -1.0])


def test_matches_equal_the_twin_and_tell_the_gestures_apart(hands):
    gesture_set = recorded_set(hands)
    queries, wanted = [], []
    for name in ("up", "palm", "victory"):
        for deg, scale, flip in ((0, 1, False), (35, 0.5, True), (-150, 3, False)):
            queries.append(moved(hands[name], deg, scale, 50, flip))
            wanted.append(f"my {name}")
    queries.append(moved(hands["down"], 0, 1, 0, False))   # another person's thumbs-down: none of these
    js = run_node(queries=queries, gesture_set=gesture_set)["matches"]
    for q, got in zip(queries, js):
        ours = SETS.match(cg.normalise_hand(q["points"], q["handedness"]), gesture_set)
        assert (ours is None) == (got is None)
        if ours:
            assert ours["name"] == got["name"] and ours["votes"] == got["votes"]
            assert ours["distance"] == pytest.approx(got["distance"], abs=1e-12)
    names = [m and m["name"] for m in js]
    assert names == [*wanted, None], names
    assert all(m["confidence"] == 1.0 for m in js[:-1])


def test_a_hand_unlike_every_example_matches_nothing(hands):
    gesture_set = SETS.validate(gesture_file([
        {"name": "palm", "examples": [cg.normalise_hand(hands["palm"]["points"], hands["palm"]["handedness"])]}]))
    fist = hands["up"]
    assert SETS.match(cg.normalise_hand(fist["points"], fist["handedness"]), gesture_set) is None
    assert run_node(queries=[fist], gesture_set=gesture_set)["matches"] == [None]
    assert SETS.match(cg.normalise_hand(fist["points"], fist["handedness"]), gesture_file([])) is None


def test_adding_examples_keeps_the_limits_and_loses_nothing(hands):
    adds = [["a", 3], ["  a ", 2], ["", 1], ["x" * 41, 1], ["b", 0], ["b", SETS.limits["examples"] + 5], ["b", 1]]
    adds += [[f"g{i}", 1] for i in range(SETS.limits["classes"])]
    got = run_node(hands=[hands["palm"]], adds=adds)["added"]
    counts = dict(got["counts"])
    assert counts["a"] == 5                                # "  a " is "a"
    assert counts["b"] == SETS.limits["examples"]          # filled to the limit, then refused
    assert len(counts) == SETS.limits["classes"]           # a, b and 18 more; the last two refused
    assert [e.split(" ")[0] for e in got["errors"]] == ["Give", "A", "Nothing", '"b"', "At", "At"], got["errors"]


def good_file(hands) -> dict:
    return recorded_set(hands)


BAD = {
    "not json": "{nope",
    "nested past the limit": "[" * 100_000,
    "a list": "[]",
    "other format": {"format": "teachable-machine", "version": 1, "classes": []},
    "version 2": {"format": SETS.format, "version": 2, "classes": []},
    "no classes": {"format": SETS.format, "version": 1},
    "empty name": {"format": SETS.format, "version": 1, "classes": [{"name": "", "examples": [[0] * 40]}]},
    "padded name": {"format": SETS.format, "version": 1, "classes": [{"name": " a", "examples": [[0] * 40]}]},
    "long name": {"format": SETS.format, "version": 1, "classes": [{"name": "x" * 41, "examples": [[0] * 40]}]},
    "no examples": {"format": SETS.format, "version": 1, "classes": [{"name": "a", "examples": []}]},
    "short example": {"format": SETS.format, "version": 1, "classes": [{"name": "a", "examples": [[0] * 39]}]},
    "text in example": {"format": SETS.format, "version": 1, "classes": [{"name": "a", "examples": [["0"] * 40]}]},
    "true in example": {"format": SETS.format, "version": 1, "classes": [{"name": "a", "examples": [[True] * 40]}]},
    "twice": {"format": SETS.format, "version": 1, "classes": [{"name": "a", "examples": [[0] * 40]}] * 2},
    "too many gestures": {"format": SETS.format, "version": 1,
                          "classes": [{"name": f"g{i}", "examples": [[0] * 40]} for i in range(21)]},
    "too many examples": {"format": SETS.format, "version": 1, "classes": [{"name": "a", "examples": [[0] * 40] * 301}]},
    "NaN": '{"format": "%s", "version": 1, "classes": [{"name": "a", "examples": [[NaN%s]]}]}' % (SETS.format, ", 0" * 39),
}


def test_bad_files_are_refused_alike_with_a_reason(hands):
    texts = [v if isinstance(v, str) else json.dumps(v) for v in BAD.values()] + [json.dumps(good_file(hands))]
    js = run_node(files=texts)["files"]
    for (why, _), text, got in zip(BAD.items(), texts, js):
        assert got.startswith("Not a gesture file"), (why, got)
        with pytest.raises(ExampleFileError, match="not a gesture file"):
            SETS.parse(text.encode())
    assert js[-1] == "ok"
    assert SETS.parse(texts[-1].encode())["classes"][0]["name"] == "my up"


CLASSES_RUNNER = """
import {CLASS_SETS} from %s;
const matches = req.queries.map((q) => CLASS_SETS.match(q, req.set));
const files = req.files.map((f) => { try { CLASS_SETS.parse(f); return 'ok'; } catch (e) { return e.message; } });
process.stdout.write(JSON.stringify({matches, files}));
""" % js_url(JS / "contract/custom_classes.js")


def test_your_classes_match_alike_in_both_twins():
    """custom_classes.js vs modelcontract/custom_classes.py: cosine k-NN on 1280-number
    vectors (post-ReLU6 means, as the pooled head gives), the same names, votes and
    distances; the same files refused."""
    from modelcontract.custom_classes import CLASS_SETS

    rng = np.random.default_rng(11)
    centres = rng.uniform(0, 2, (3, 1280))
    classes = [{"name": f"c{i}", "examples": (c + rng.normal(0, 0.3, (4, 1280))).clip(0, 6).round(4).tolist()}
               for i, c in enumerate(centres)]
    gesture_set = CLASS_SETS.validate({"format": CLASS_SETS.format, "version": 1, "classes": classes})
    queries = [(centres[i % 3] + rng.normal(0, 0.3, 1280)).clip(0, 6).tolist() for i in range(9)]
    files = [json.dumps({"format": CLASS_SETS.format, "version": 1, "classes": classes * 4}),   # names twice
             json.dumps({"format": CLASS_SETS.format, "version": 1,
                         "classes": [{"name": f"k{i}", "examples": [[0.5] * 1280]} for i in range(11)]}),
             json.dumps(gesture_set)]
    js = node.run_node(CLASSES_RUNNER, {"queries": queries, "set": gesture_set, "files": files}, timeout=60)
    for i, (q, got) in enumerate(zip(queries, js["matches"])):
        ours = CLASS_SETS.match(q, gesture_set)
        assert ours["name"] == got["name"] == f"c{i % 3}" and ours["votes"] == got["votes"]
        assert ours["distance"] == pytest.approx(got["distance"], abs=1e-12)
    assert js["files"][:2] == [m for m in js["files"][:2] if m.startswith("Not a class file")] and js["files"][2] == "ok"
    for text in files[:2]:
        with pytest.raises(ExampleFileError, match="not a class file"):
            CLASS_SETS.parse(text.encode())
