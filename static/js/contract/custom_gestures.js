// Your own hand gestures: recorded examples of 21 keypoints, recognised by a k-nearest-
// neighbour match (example_sets.js). Pure functions (no DOM, no storage): the hands page,
// Node tests and the server's twin (modelcontract/custom_gestures.py) share the rules and
// the file format.
//
// A hand becomes 40 numbers: keypoints 1..20 relative to the wrist, turned so the wrist ->
// middle-finger MCP points up, divided by that length, and mirrored for a left hand (x
// flipped), so one recording serves both hands at any size, place and turn in the picture.
// Two hands compare by the mean distance of their 20 keypoints, in palm lengths. Of the
// examples within 0.3 palm lengths, the 5 nearest vote (a gesture's confidence is its share
// of the votes); with none that near, the hand is none of yours.

import {ExampleSets} from './example_sets.js';
import TWINS from './twins.json' with {type: 'json'};

// format, size, limits, max_distance, k, decimals, noun (twins.json; custom_gestures.py reads the same).
const KIND = TWINS.example_sets.custom_gestures;
export const LIMITS = KIND.limits;
const SIZE = KIND.size;   // 20 keypoints x (x, y)

const xy = (p) => (Array.isArray(p) ? [p[0], p[1]] : [p.x, p.y]);

// 21 image keypoints (y down) and the person's handedness -> 40 numbers.
export function normaliseHand(points, handedness) {
  if (!points || points.length !== 21) throw new Error(`need 21 landmarks, got ${points ? points.length : 0}`);
  const pts = points.map(xy);
  const [wx, wy] = pts[0];
  const mx = pts[9][0] - wx;
  const my = pts[9][1] - wy;
  const scale = Math.hypot(mx, my) || 1;
  const ux = mx / scale;
  const uy = my / scale;
  const flip = handedness === 'Left' ? -1 : 1;
  const out = new Array(SIZE);
  for (let i = 1; i < 21; i++) {
    const x = pts[i][0] - wx;
    const y = pts[i][1] - wy;
    // The rotation that takes (ux, uy) to (0, -1): straight up in the picture.
    out[2 * (i - 1)] = flip * (-uy * x + ux * y) / scale;
    out[2 * (i - 1) + 1] = (-ux * x - uy * y) / scale;
  }
  return out;
}

export function handDistance(a, b) {
  let sum = 0;
  for (let i = 0; i < SIZE; i += 2) sum += Math.hypot(a[i] - b[i], a[i + 1] - b[i + 1]);
  return sum / (SIZE / 2);
}

export const GESTURE_SETS = new ExampleSets({...KIND, distance: handDistance});
