// MediaPipe Gesture Recognizer's seven gestures (thumbs up, thumbs down, victory, open palm,
// closed fist, pointing up, "I love you") or none, from MediaPipe's 21 hand landmarks. Pure
// functions, no DOM and no TF.js: the page, Node unit tests and any other caller share this
// one module; modelcontract/gesture.py is its Python twin for the API.
//
// Points: 21 x [x, y] or [x, y, z] (or {x, y, z}), any unit, y pointing DOWN: the image
// keypoints (pixels). Optionally `world`: MediaPipe's 3-D world landmarks (metres, axes
// following the image); when given, the hand's shape (finger curl, thumb straightness and
// reach) is read from them — better for fingers curled towards the camera — while directions
// (thumb or index up or down) are always read from the image x, y, because "up" means up in
// the picture.
//
// Rules (all ratios and angles, so scale-free; measured in the hand's own frame, so
// rotation-free except the up/down directions, which are the gesture itself; mirror-free, so
// either hand):
//   1. each of the four fingers is folded (its PIP -> tip points back against the palm's
//      wrist -> MCP direction: cosine below a threshold), extended (cosine above another) or
//      in between; SHAPES gives each gesture's pattern, index to pinky;
//   2. the thumb is straight; it is extended when its tip is also far from the fingers' PIP
//      and DIP joints (a thumb tucked across a fist is not); it is out of a fist when its tip
//      is, in addition, the hand's extreme point along the thumb's own direction, by a margin;
//   3. four folded fingers: a thumb out pointing up (down) in the picture, within a cone, is
//      thumbs up (down), a thumb not out a closed fist; the index alone extended, pointing up
//      within a cone, is pointing up; index and middle, victory; index and pinky with the
//      thumb extended, "I love you"; all four with a straight thumb, open palm.
// Each threshold has an "enter" and a looser "hold" value: classifyGesture(points, {hold})
// keeps a gesture already shown unless a feature clearly leaves it (hysteresis). The numbers,
// the finger patterns and the gesture table are twins.json's (gesture.py reads the same).
import TWINS from './twins.json' with {type: 'json'};

export const WRIST = 0;
const THUMB = [1, 2, 3, 4];
const FINGERS = [[5, 6, 7, 8], [9, 10, 11, 12], [13, 14, 15, 16], [17, 18, 19, 20]];

// {name: {label, emoji}}, 'none' last.
export const GESTURES = TWINS.gesture.gestures;
// [enter, hold] per rule (what each measures: twins.json's "$thresholds").
export const THRESHOLDS = TWINS.gesture.thresholds;
// Finger states per gesture, index to pinky: E extended, F folded.
export const SHAPES = TWINS.gesture.shapes;
// The gestures whose thumb sticks out.
const THUMB_OUT = TWINS.gesture.thumb_out;

function toPoints(points) {
  if (!points || points.length !== 21) throw new Error(`need 21 landmarks, got ${points ? points.length : 0}`);
  return points.map((p) => (Array.isArray(p) ? [p[0], p[1], p.length > 2 && p[2] != null ? p[2] : 0]
                                              : [p.x, p.y, p.z == null ? 0 : p.z]));
}

const sub = (a, b) => [a[0] - b[0], a[1] - b[1], a[2] - b[2]];
const norm = (v) => Math.hypot(v[0], v[1], v[2]);
const dist = (a, b) => norm(sub(a, b));
const cosine = (a, b) => (a[0] * b[0] + a[1] * b[1] + a[2] * b[2]) / ((norm(a) * norm(b)) || 1);

function straightness(pts, chain) {
  let length = 0;
  for (let i = 1; i < chain.length; i++) length += dist(pts[chain[i]], pts[chain[i - 1]]);
  return length > 0 ? dist(pts[chain[chain.length - 1]], pts[chain[0]]) / length : 0;
}

// Palm length: the largest of the wrist -> MCP and MCP -> MCP spans (stable under
// foreshortening of any single one of them).
function palmLength(pts) {
  const w = pts[WRIST];
  return Math.max(dist(w, pts[5]), dist(w, pts[9]), dist(w, pts[17]), dist(pts[5], pts[17])) || 1;
}

// The features the rules read; exported for tests and for showing why a gesture was chosen.
export function handFeatures(points, world = null) {
  const img = toPoints(points);
  const shape = world ? toPoints(world) : img;
  const shapeScale = palmLength(shape);
  const fingerFold = FINGERS.map(([mcp, pip, , tip]) => cosine(sub(shape[mcp], shape[WRIST]), sub(shape[tip], shape[pip])));
  const thumbStraight = straightness(shape, THUMB.slice(1));
  const joints = FINGERS.flatMap((f) => [shape[f[1]], shape[f[2]]]);
  const tip = shape[THUMB[3]];
  const thumbOut = Math.min(...joints.map((j) => dist(tip, j))) / shapeScale;
  const axis = sub(tip, shape[THUMB[1]]);
  const unit = axis.map((c) => c / (norm(axis) || 1));
  const along = (p) => p[0] * unit[0] + p[1] * unit[1] + p[2] * unit[2];
  const others = FINGERS.flat().concat([WRIST]).map((i) => along(shape[i]));
  const thumbReach = (along(tip) - Math.max(...others)) / shapeScale;
  const thumbAngle = angleFromUp(img[THUMB[1]], img[THUMB[3]]);
  const indexAngle = angleFromUp(img[FINGERS[0][0]], img[FINGERS[0][3]]);
  return {fingerFold, thumbStraight, thumbOut, thumbReach, thumbAngle, indexAngle};
}

// Direction of a -> b in the picture: degrees from straight up (0) to straight down (180).
function angleFromUp(a, b) {
  const v = sub(b, a);
  return Math.atan2(Math.abs(v[0]), -v[1]) * 180 / Math.PI;
}

function pick(rule, holding) {
  return THRESHOLDS[rule][holding ? 1 : 0];
}

// 'E', 'F' or '-' per finger, index to pinky; a finger the held gesture has in a state
// keeps it with that state's looser threshold.
function fingerStates(fold, hold) {
  const held = SHAPES[hold] || '----';
  return fold.map((c, i) => {
    if (c < pick('fingerFold', held[i] === 'F')) return 'F';
    if (c > pick('fingerExtend', held[i] === 'E')) return 'E';
    return '-';
  }).join('');
}

function gestureOf(f, hold) {
  const holding = THUMB_OUT.includes(hold);   // the thumb's looser thresholds keep a thumb that is out
  const fingers = fingerStates(f.fingerFold, hold);
  const thumbStraight = f.thumbStraight > pick('thumbStraight', holding);
  const thumbExtended = thumbStraight && f.thumbOut > pick('thumbOut', holding);
  const thumbOut = thumbExtended && f.thumbReach > pick('thumbReach', holding);
  switch (fingers) {
    case 'FFFF':
      if (!thumbOut) return 'closed_fist';
      if (f.thumbAngle < pick('thumbCone', hold === 'thumbs_up')) return 'thumbs_up';
      if (180 - f.thumbAngle < pick('thumbCone', hold === 'thumbs_down')) return 'thumbs_down';
      return 'none';
    case 'EFFF': return f.indexAngle < pick('indexCone', hold === 'pointing_up') ? 'pointing_up' : 'none';
    case 'EEFF': return 'victory';
    case 'EFFE': return thumbExtended ? 'iloveyou' : 'none';
    case 'EEEE': return thumbStraight ? 'open_palm' : 'none';
    default: return 'none';
  }
}

// -> {gesture: one of GESTURES' keys, features}
export function classifyGesture(points, {world = null, hold = 'none'} = {}) {
  const features = handFeatures(points, world);
  return {gesture: gestureOf(features, hold), features};
}

// Live video: a new gesture is shown only after `frames` consecutive frames agree, and the
// shown one is classified with the looser "hold" thresholds. Together: no flicker.
export class GestureStabilizer {
  constructor({frames = 3} = {}) {
    this.frames = frames;
    this.reset();
  }

  reset() {
    this.stable = 'none';
    this.candidate = null;
    this.count = 0;
  }

  // points (, world) -> {gesture (stable), raw, features}
  update(points, world = null) {
    const {gesture: raw, features} = classifyGesture(points, {world, hold: this.stable});
    if (raw === this.stable) {
      this.candidate = null;
      this.count = 0;
    } else if (raw === this.candidate) {
      this.count += 1;
    } else {
      this.candidate = raw;
      this.count = 1;
    }
    if (this.candidate != null && this.count >= this.frames) {
      this.stable = this.candidate;
      this.candidate = null;
      this.count = 0;
    }
    return {gesture: this.stable, raw, features};
  }
}

// Several hands over time: one stabilizer per hand, matched frame to frame by the nearest
// wrist (in palm lengths), preferring the same key (e.g. handedness) — so a handedness label
// that flips for a frame does not restart the hand's gesture. A hand unseen for `forget`
// frames is dropped.
export class GestureTracker {
  constructor({frames = 3, forget = 5} = {}) {
    this.frames = frames;
    this.forget = forget;
    this.tracks = [];   // {key, wrist, stabilizer, missed}
  }

  reset() {
    this.tracks = [];
  }

  // hands: [{key, points, world?}] -> [{gesture, raw, features}] in the same order.
  update(hands) {
    const free = new Set(this.tracks);
    const results = hands.map((hand) => {
      const pts = toPoints(hand.points);
      const wrist = pts[WRIST];
      const scale = palmLength(pts);
      let best = null;
      for (const track of free) {
        const moved = dist(track.wrist, wrist) / scale;
        if (moved > 2 && track.key !== hand.key) continue;   // another hand, not this one relabelled
        const cost = moved + (track.key === hand.key ? 0 : 1);
        if (!best || cost < best.cost) best = {track, cost};
      }
      let track = best && best.track;
      if (!track) {
        track = {key: hand.key, stabilizer: new GestureStabilizer({frames: this.frames})};
        this.tracks.push(track);
      }
      free.delete(track);
      track.key = hand.key;
      track.wrist = wrist;
      track.missed = 0;
      return track.stabilizer.update(pts, hand.world || null);
    });
    for (const track of free) track.missed += 1;
    this.tracks = this.tracks.filter((t) => t.missed <= this.forget);
    return results;
  }
}
