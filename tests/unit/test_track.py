"""modelcontract/track.py's behaviour (static/js/contract/track.js is held to it by test_track_twin):
IDs that survive crossings, occlusion and weak frames, no IDs for one-frame clutter, classes
kept apart, and exact line and zone counts."""
from __future__ import annotations

import pytest

from modelcontract.track import DEFAULTS, LineCounter, Tracker, crosses, inside, mot_rows, zone_counts
from harness.track_scenes import detection, id_switches, scene


def moving(start, velocity, frames, size=(40, 80), class_id=0, score=0.9, truth=0):
    """One object's detections: [frame] -> detection, constant velocity."""
    out = []
    for f in range(frames):
        x, y = start[0] + velocity[0] * f, start[1] + velocity[1] * f
        out.append(detection([x, y, x + size[0], y + size[1]], score, class_id, truth=truth))
    return out


def run(frames, **options):
    tracker = Tracker(**options)
    return [tracker.update(dets) for dets in frames]


@pytest.mark.parametrize("seed", range(8))
def test_no_id_switches_on_noisy_scenes(seed):
    frames = scene(seed, frames=90, objects=8)
    tracked = run(frames)
    switches, matched = id_switches(frames, tracked)
    assert switches == 0
    assert matched >= 0.8 * sum(d["truth"] is not None for f in frames for d in f)


def test_two_objects_crossing_paths_keep_their_ids():
    a = moving((0, 100), (8, 0), 60, truth=0)
    b = moving((472, 100), (-8, 0), 60, truth=1)     # they overlap head-on mid-way
    frames = [[da, db] for da, db in zip(a, b)]
    tracked = run(frames)
    assert id_switches(frames, tracked) == (0, 120)
    assert {t["id"] for f in tracked for t in f} == {1, 2}


def test_a_source_that_skips_frames_keeps_ids_when_the_tracker_is_told_how_many():
    """A live page that falls behind takes every few frames: told the steps, the tracker
    predicts that far and each object keeps its ID; told nothing, the small fast ones jump
    past their tracks."""
    a = moving((0, 50), (7, 0), 120, size=(30, 60), truth=0)
    b = moving((600, 250), (-6, 1), 120, size=(36, 70), truth=1)
    taken = [0, 1, 2, 3, 4, 5, 11, 12, 13, 19, 20, 26, 27, 28, 29, 36, 37, 38, 39, 40, 48, 49, 50]
    frames = [[a[f], b[f]] for f in taken]
    steps = [1] + [later - f for f, later in zip(taken, taken[1:])]
    told = Tracker()
    tracked = [told.update(dets, s) for dets, s in zip(frames, steps)]
    assert id_switches(frames, tracked) == (0, 2 * len(taken))
    assert {t["id"] for f in tracked for t in f} == {1, 2}
    untold = run(frames)
    assert len({t["id"] for f in untold for t in f}) > 2


def test_an_occluded_object_is_found_again_within_max_lost():
    obj = moving((0, 0), (5, 2), 80)
    hidden = set(range(20, 20 + DEFAULTS["max_lost"]))        # unseen for max_lost frames
    tracked = run([[] if f in hidden else [d] for f, d in enumerate(obj)])
    assert {t["id"] for f in tracked for t in f} == {1}
    assert all(not tracked[f] for f in hidden) and tracked[-1][0]["id"] == 1


def test_an_object_lost_longer_than_max_lost_gets_a_new_id():
    obj = moving((0, 0), (5, 2), 80)
    hidden = set(range(20, 21 + DEFAULTS["max_lost"]))
    tracked = run([[] if f in hidden else [d] for f, d in enumerate(obj)])
    back = 21 + DEFAULTS["max_lost"]                          # tentative on its first frame back
    assert [f[0]["id"] if f else None for f in tracked] == [1] * 20 + [None] * (back + 1 - 20) + [2] * (79 - back)


def test_weak_detections_keep_a_track_but_do_not_start_one():
    obj = moving((0, 0), (4, 0), 30)
    for d in obj[10:20]:
        d["score"] = 0.3                                   # between low and high
    tracked = run([[d] for d in obj])
    assert [f[0]["id"] if f else None for f in tracked] == [1] * 30
    # Weak from the start: never a track.
    assert not any(run([[d] for d in obj[10:20]]))
    # Below low: ignored, so the track is lost over those frames and found again after them.
    tracked = run([[d] for d in obj], low=0.35)
    assert [bool(f) for f in tracked] == [True] * 10 + [False] * 10 + [True] * 10
    assert {t["id"] for f in tracked for t in f} == {1}


def test_one_frame_clutter_never_gets_an_id():
    obj = moving((0, 0), (4, 0), 20)
    frames = [[d] for d in obj]
    frames[5].append(detection([400, 300, 440, 340], 0.9, 1))   # one frame only, confident
    frames[9].append(detection([300, 200, 340, 240], 0.9, 1))
    frames[10].append(detection([302, 200, 342, 240], 0.9, 1))  # two frames: confirmed on the second
    tracked = run(frames)
    assert [len(f) for f in tracked] == [1] * 10 + [2] + [1] * 9
    assert tracked[10][1]["id"] == 2 and tracked[10][1]["box"] == frames[10][1]["box"]


def test_confirmation_waits_for_confirm_frames_except_on_the_first_frame():
    late = moving((100, 100), (2, 0), 6)
    other = moving((0, 0), (2, 0), 6, truth=1)
    tracked = run([[o] + ([d] if f >= 2 else []) for f, (o, d) in enumerate(zip(other, late))], confirm=3)
    assert [len(f) for f in tracked] == [1, 1, 1, 1, 2, 2]   # the one there from frame 1 at once


def test_classes_are_never_matched_to_each_other():
    person = moving((0, 0), (3, 0), 20)
    car = moving((0, 0), (3, 0), 20, class_id=1)
    tracked = run([[person[f]] if f < 10 else [car[f]] for f in range(20)])
    assert [(f[0]["id"], f[0]["label"]) for f in tracked if f] == [(1, "person")] * 10 + [(2, "car")] * 9
    assert not tracked[10]                                  # the car is tentative on its first frame


def test_line_counts_each_direction_per_class_once_per_track():
    line = LineCounter([200, 0], [200, 480])                # drawn downwards: its right is x < 200
    frames = [[a, b, c] for a, b, c in zip(moving((0, 0), (10, 0), 40, truth=0),
                                           moving((400, 200), (-10, 0), 40, truth=1),
                                           moving((0, 300), (10, 0), 40, class_id=1, truth=2))]
    tracker = Tracker()
    for dets in frames:
        counts = line.update(tracker.update(dets))
    assert counts == {"person": {"in": 1, "out": 1}, "car": {"in": 0, "out": 1}}
    # A box jittering across the line counts once per direction.
    line, tracker = LineCounter([200, 0], [200, 480]), Tracker()
    for f in range(30):
        x = 175 + (f % 2) * 10                             # centre 200 +- 5
        counts = line.update(tracker.update([detection([x, 0, x + 40, 80], 0.9, 0)]))
    assert counts == {"person": {"in": 1, "out": 1}}
    line.reset()
    assert line.update([]) == {}


def test_a_move_beside_the_segment_does_not_cross_it():
    assert crosses([0, 0], [0, 10], [-1, 5], [1, 5])
    assert not crosses([0, 0], [0, 10], [-1, 15], [1, 15])      # past its end
    assert not crosses([0, 0], [0, 10], [-1, 5], [0, 5])        # onto it, not across


def test_zone_counts_what_is_inside_now():
    zone = [[0, 0], [100, 0], [100, 100], [0, 100]]
    assert inside(zone, [50, 50]) and not inside(zone, [150, 50])
    tracks = [{"id": 1, "class_id": 0, "label": "person", "trail": [[50, 50]]},
              {"id": 2, "class_id": 0, "label": "person", "trail": [[10, 90]]},
              {"id": 3, "class_id": 1, "label": None, "trail": [[150, 50]]}]
    assert zone_counts(zone, tracks) == {"person": 2}
    assert zone_counts(zone[:2], tracks) == {}


def test_mot_rows_and_options():
    tracked = Tracker().update([detection([10, 20, 50, 100], 0.8, 2)])
    assert mot_rows(7, tracked) == [[7, 1, 10.0, 20.0, 40.0, 80.0, 0.8, 2]]
    with pytest.raises(ValueError, match="unknown tracker options"):
        Tracker(thresh=0.5)
