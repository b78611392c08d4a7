// Your own hand gestures: recorded examples of 21 keypoints, recognised by a k-nearest-
// neighbour match. Pure functions (no DOM, no storage): the hands page, Node tests and the
// server's twin (modelcontract/custom_gestures.py) share the rules and the file format.
//
// A hand becomes 40 numbers: keypoints 1..20 relative to the wrist, turned so the wrist ->
// middle-finger MCP points up, divided by that length, and mirrored for a left hand (x
// flipped), so one recording serves both hands at any size, place and turn in the picture.
// Two hands compare by the mean distance of their 20 keypoints, in palm lengths. Of the
// examples within MATCH.maxDistance, the k nearest vote (a gesture's confidence is its share
// of the votes); with none that near, the hand is none of yours.

export const FORMAT = 'datarailroad-hand-gestures';
export const VERSION = 1;
export const LIMITS = {gestures: 20, examples: 300, name: 40, warnBelow: 5};
export const MATCH = {k: 5, maxDistance: 0.3};
const SIZE = 40;   // 20 keypoints x (x, y)

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

// vector, set -> {name, distance (its nearest example's), confidence, votes: {name: share
// of the k nearest}} or null when no example is near enough (or the set is empty).
export function matchHand(vector, set) {
  const near = [];
  set.gestures.forEach((g, order) => {
    for (const e of g.examples) {
      const d = handDistance(vector, e);
      if (d <= MATCH.maxDistance) near.push({name: g.name, order, d});
    }
  });
  if (!near.length) return null;
  near.sort((a, b) => a.d - b.d || a.order - b.order);
  const k = Math.min(MATCH.k, near.length);
  const tally = new Map();   // name -> {votes, nearest}
  for (const {name, d} of near.slice(0, k)) {
    const t = tally.get(name) || {votes: 0, nearest: d};
    t.votes += 1;
    tally.set(name, t);
  }
  let best = null;
  for (const [name, t] of tally) {
    if (!best || t.votes > best.votes || (t.votes === best.votes && t.nearest < best.nearest)) best = {name, ...t};
  }
  const votes = Object.fromEntries([...tally].map(([name, t]) => [name, t.votes / k]));
  return {name: best.name, distance: best.nearest, confidence: best.votes / k, votes};
}

export function emptySet() {
  return {format: FORMAT, version: VERSION, gestures: []};
}

export function checkName(name) {
  const clean = String(name == null ? '' : name).trim();
  if (!clean) throw new Error('Give the gesture a name first.');
  if (clean.length > LIMITS.name) throw new Error(`A name has at most ${LIMITS.name} characters.`);
  return clean;
}

// A new set with `vectors` added to the gesture `name` (made if new); the set given is
// never changed, so a refused addition loses nothing.
export function addExamples(set, name, vectors) {
  const clean = checkName(name);
  if (!vectors.length) throw new Error('No hand was seen while recording: nothing was added.');
  const gestures = set.gestures.map((g) => ({name: g.name, examples: g.examples.slice()}));
  let gesture = gestures.find((g) => g.name === clean);
  if (!gesture) {
    if (gestures.length >= LIMITS.gestures) throw new Error(`At most ${LIMITS.gestures} gestures: remove one first.`);
    gesture = {name: clean, examples: []};
    gestures.push(gesture);
  }
  const room = LIMITS.examples - gesture.examples.length;
  if (room <= 0) throw new Error(`"${clean}" already has ${LIMITS.examples} examples, the most a gesture keeps.`);
  // 4 decimals (1e-4 palm lengths) keep the file small and change no match.
  gesture.examples.push(...vectors.slice(0, room).map((v) => v.map((x) => Math.round(x * 1e4) / 1e4)));
  return {format: FORMAT, version: VERSION, gestures};
}

export function removeGesture(set, name) {
  return {format: FORMAT, version: VERSION, gestures: set.gestures.filter((g) => g.name !== name)};
}

// Parsed JSON -> the set, or an Error saying what is wrong (the same checks as the
// server's JSON Schema, modelcontract/custom_gestures.py).
export function validateSet(data) {
  const fail = (why) => { throw new Error(`Not a gesture file: ${why}.`); };
  if (!data || typeof data !== 'object' || Array.isArray(data)) fail('not a JSON object');
  if (data.format !== FORMAT) fail(`"format" is not "${FORMAT}"`);
  if (data.version !== VERSION) fail(`version ${JSON.stringify(data.version)} is not ${VERSION}`);
  if (!Array.isArray(data.gestures)) fail('"gestures" is not a list');
  if (data.gestures.length > LIMITS.gestures) fail(`${data.gestures.length} gestures, more than ${LIMITS.gestures}`);
  const names = new Set();
  for (const [i, g] of data.gestures.entries()) {
    if (!g || typeof g !== 'object' || typeof g.name !== 'string') fail(`gesture ${i + 1} has no name`);
    const name = g.name.trim();
    if (!name || name !== g.name || name.length > LIMITS.name) fail(`gesture ${i + 1}'s name is empty, padded or over ${LIMITS.name} characters`);
    if (names.has(name)) fail(`"${name}" appears twice`);
    names.add(name);
    if (!Array.isArray(g.examples) || !g.examples.length) fail(`"${name}" has no examples`);
    if (g.examples.length > LIMITS.examples) fail(`"${name}" has ${g.examples.length} examples, more than ${LIMITS.examples}`);
    for (const e of g.examples) {
      if (!Array.isArray(e) || e.length !== SIZE || !e.every((v) => typeof v === 'number' && Number.isFinite(v))) {
        fail(`an example of "${name}" is not ${SIZE} finite numbers`);
      }
    }
  }
  return {format: FORMAT, version: VERSION, gestures: data.gestures.map((g) => ({name: g.name, examples: g.examples}))};
}

// Text of a file -> the set (throws with a message for the user).
export function parseSet(text) {
  let data;
  try {
    data = JSON.parse(text);
  } catch {
    throw new Error('Not a gesture file: it is not JSON.');
  }
  return validateSet(data);
}
