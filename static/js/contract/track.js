// Multi-object tracking (ByteTrack's association, a constant-velocity Kalman filter per track)
// and line / zone counting. Pure functions and classes, no DOM and no TF.js. The twin of
// modelcontract/track.py: same rules, defaults and arithmetic (doubles); the server and the
// benches use that one, and tests/unit/test_track_twin.py holds the two to the same tracks. The
// rules are written out there; in brief, per frame: predict, match confident detections to
// confirmed and lost tracks, weak ones to the confirmed left over, the rest to tentative
// tracks, start new tracks from confident leftovers, drop what has been lost too long.

import TWINS from './twins.json' with {type: 'json'};

// high, low, birth, match_iou, low_match_iou, tentative_iou, confirm, max_lost, trail: the
// tracker's defaults (twins.json, what each means beside them; track.py reads the same).
export const DEFAULTS = Object.freeze({...TWINS.track.defaults});

const POSITION_WEIGHT = 1 / 20;
const VELOCITY_WEIGHT = 1 / 160;
const GATED = 1e6;

export function iou(a, b) {
  const iw = Math.max(0, Math.min(a[2], b[2]) - Math.max(a[0], b[0]));
  const ih = Math.max(0, Math.min(a[3], b[3]) - Math.max(a[1], b[1]));
  const inter = iw * ih;
  const union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter;
  return union > 0 ? inter / union : 0;
}

function boxToXyah([x1, y1, x2, y2]) {
  const w = x2 - x1;
  const h = y2 - y1;
  return [x1 + w / 2, y1 + h / 2, h > 0 ? w / h : 0, h];
}

// ------------------------------------------------------------- small dense matrices (rows)

const zeros = (n, m) => Array.from({length: n}, () => new Array(m).fill(0));
const transpose = (a) => a[0].map((_, j) => a.map((row) => row[j]));

// x with a x = b (a square, b a matrix), Gaussian elimination with partial pivoting.
function solve(a, b) {
  const n = a.length;
  const m = a.map((row, i) => [...row, ...b[i]]);
  for (let c = 0; c < n; c++) {
    let pivot = c;
    for (let r = c + 1; r < n; r++) if (Math.abs(m[r][c]) > Math.abs(m[pivot][c])) pivot = r;
    [m[c], m[pivot]] = [m[pivot], m[c]];
    for (let r = c + 1; r < n; r++) {
      const f = m[r][c] / m[c][c];
      for (let j = c; j < m[r].length; j++) m[r][j] -= f * m[c][j];
    }
  }
  const x = zeros(n, b[0].length);
  for (let r = n - 1; r >= 0; r--) {
    for (let j = 0; j < x[0].length; j++) {
      let s = m[r][n + j];
      for (let k = r + 1; k < n; k++) s -= m[r][k] * x[k][j];
      x[r][j] = s / m[r][r];
    }
  }
  return x;
}

// Covariances are flat row-major 8x8 Float64Arrays, and F P F^T is written out for
// F = [[I, I], [0, I]] (4x4 blocks): every track predicts on every frame, and nested arrays
// and full matrix products made this filter most of the tracker's time. The sums are the
// ones the full products make, in the same order (the twin test holds them to Python's).
function diagonal(std) {
  const a = new Float64Array(64);
  std.forEach((s, i) => { a[i * 9] = s * s; });
  return a;
}

// Constant velocity on (cx, cy, aspect, height) and their rates, one frame a step.
export class KalmanBox {
  constructor(box) {
    const z = boxToXyah(box);
    const h = z[3];
    const p = 2 * POSITION_WEIGHT * h;
    const v = 10 * VELOCITY_WEIGHT * h;
    this.mean = [...z, 0, 0, 0, 0];
    this.cov = diagonal([p, p, 1e-2, p, v, v, 1e-5, v]);
  }

  predict(stillHeight = false) {
    const m = this.mean;
    if (stillHeight) m[7] = 0; // a lost track: its height stops changing
    const h = m[3];
    const p = POSITION_WEIGHT * h;
    const v = VELOCITY_WEIGHT * h;
    for (let i = 0; i < 4; i++) m[i] += m[i + 4];
    const c = this.cov;
    const fp = new Float64Array(64); // F P: row i (< 4) gains row i + 4
    for (let i = 0; i < 8; i++) {
      for (let j = 0; j < 8; j++) fp[i * 8 + j] = i < 4 ? c[i * 8 + j] + c[(i + 4) * 8 + j] : c[i * 8 + j];
    }
    const out = new Float64Array(64); // (F P) F^T: column j (< 4) gains column j + 4
    for (let i = 0; i < 8; i++) {
      for (let j = 0; j < 8; j++) out[i * 8 + j] = j < 4 ? fp[i * 8 + j] + fp[i * 8 + j + 4] : fp[i * 8 + j];
    }
    [p, p, 1e-2, p, v, v, 1e-5, v].forEach((s, i) => { out[i * 9] += s * s; });
    this.cov = out;
  }

  update(box) {
    const z = boxToXyah(box);
    const p = POSITION_WEIGHT * this.mean[3];
    const c = this.cov;
    // H P is P's first 4 rows; S = H P H^T + R, their first 4 columns plus R.
    const r = [p, p, 1e-1, p];
    const hp = [];
    const s = [];
    for (let i = 0; i < 4; i++) {
      hp.push([c[i * 8], c[i * 8 + 1], c[i * 8 + 2], c[i * 8 + 3], c[i * 8 + 4], c[i * 8 + 5], c[i * 8 + 6], c[i * 8 + 7]]);
      s.push(hp[i].slice(0, 4));
      s[i][i] += r[i] * r[i];
    }
    const x = solve(s, hp); // S^-1 H P (4 x 8): the gain P H^T S^-1 is its transpose (S, P symmetric)
    const innovation = z.map((zi, i) => zi - this.mean[i]);
    this.mean = this.mean.map((m, i) => m + innovation.reduce((acc, e, k) => acc + x[k][i] * e, 0));
    const out = new Float64Array(64); // P - K S K^T, K S first
    for (let i = 0; i < 8; i++) {
      const ks = [0, 0, 0, 0];
      for (let k = 0; k < 4; k++) for (let l = 0; l < 4; l++) ks[l] += x[k][i] * s[k][l];
      for (let j = 0; j < 8; j++) {
        let v = 0;
        for (let l = 0; l < 4; l++) v += ks[l] * x[l][j];
        out[i * 8 + j] = c[i * 8 + j] - v;
      }
    }
    this.cov = out;
  }

  box() {
    const [cx, cy, a, h] = this.mean;
    const w = a * h;
    return [cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2];
  }

  centre() {
    return [this.mean[0], this.mean[1]];
  }
}

// ------------------------------------------------------------------------ assignment

// Least-cost assignment of a rectangular cost matrix (rows x cols): [[row, col]] with one pair
// per row when rows <= cols (else per col). The shortest augmenting path form of the
// Hungarian method, O(n^2 m); exact, as scipy's linear_sum_assignment is on the Python side.
export function linearAssignment(cost) {
  const rows = cost.length;
  const cols = rows ? cost[0].length : 0;
  if (!rows || !cols) return [];
  if (rows > cols) return linearAssignment(transpose(cost)).map(([c, r]) => [r, c]);
  const u = new Array(rows + 1).fill(0);
  const v = new Array(cols + 1).fill(0);
  const owner = new Array(cols + 1).fill(0); // owner[j]: the row (1-based) on column j, 0 none
  const way = new Array(cols + 1).fill(0);
  for (let i = 1; i <= rows; i++) {
    owner[0] = i;
    let j0 = 0;
    const minv = new Array(cols + 1).fill(Infinity);
    const used = new Array(cols + 1).fill(false);
    do {
      used[j0] = true;
      const i0 = owner[j0];
      let delta = Infinity;
      let j1 = 0;
      for (let j = 1; j <= cols; j++) {
        if (used[j]) continue;
        const reduced = cost[i0 - 1][j - 1] - u[i0] - v[j];
        if (reduced < minv[j]) {
          minv[j] = reduced;
          way[j] = j0;
        }
        if (minv[j] < delta) {
          delta = minv[j];
          j1 = j;
        }
      }
      for (let j = 0; j <= cols; j++) {
        if (used[j]) {
          u[owner[j]] += delta;
          v[j] -= delta;
        } else {
          minv[j] -= delta;
        }
      }
      j0 = j1;
    } while (owner[j0] !== 0);
    do {
      const j1 = way[j0];
      owner[j0] = owner[j1];
      j0 = j1;
    } while (j0);
  }
  const pairs = [];
  for (let j = 1; j <= cols; j++) if (owner[j]) pairs.push([owner[j] - 1, j - 1]);
  return pairs.sort((a, b) => a[0] - b[0]);
}

// Pairs [track index, detection index] of one class with IoU >= minIou (most pairs, then
// least total 1 - IoU), and the unmatched of each side.
export function assign(tracks, dets, minIou) {
  if (!tracks.length || !dets.length) {
    return {pairs: [], tracksLeft: tracks.map((_, i) => i), detsLeft: dets.map((_, j) => j)};
  }
  const cost = tracks.map((t) => {
    const predicted = t.filter.box();
    return dets.map((d) => {
      if (d.class_id !== t.det.class_id) return GATED;
      const overlap = iou(predicted, d.box);
      return overlap >= minIou ? 1 - overlap : GATED;
    });
  });
  const pairs = linearAssignment(cost).filter(([i, j]) => cost[i][j] < GATED);
  const matchedT = new Set(pairs.map(([i]) => i));
  const matchedD = new Set(pairs.map(([, j]) => j));
  return {
    pairs,
    tracksLeft: tracks.map((_, i) => i).filter((i) => !matchedT.has(i)),
    detsLeft: dets.map((_, j) => j).filter((j) => !matchedD.has(j)),
  };
}

// --------------------------------------------------------------------------- tracker

class Track {
  constructor(det, frame) {
    this.filter = new KalmanBox(det.box);
    this.id = null; // given when confirmed
    this.state = 'tentative'; // -> 'tracked' <-> 'lost'
    this.hits = 1;
    this.lastFrame = frame;
    this.det = det;
    this.trail = [this.filter.centre()];
  }

  see(det, frame, keep) {
    this.filter.update(det.box);
    this.hits = this.lastFrame === frame - 1 ? this.hits + 1 : 1;
    this.lastFrame = frame;
    this.det = det;
    this.trail.push(this.filter.centre());
    if (this.trail.length > keep) this.trail.splice(0, this.trail.length - keep);
  }
}

// Detections: {box: [x1, y1, x2, y2], score, class_id, label?} (what tensor/decode.js decodes).
// update() answers the confirmed tracks matched on this frame, by ID:
// {id, class_id, label, score, box (the detection's), trail: [[x, y]] oldest first}.
export class Tracker {
  constructor(options = {}) {
    const unknown = Object.keys(options).filter((k) => !(k in DEFAULTS));
    if (unknown.length) throw new Error(`unknown tracker options: ${unknown.join(', ')}`);
    this.options = {...DEFAULTS, ...options};
    this.reset();
  }

  reset() {
    this.frame = 0;
    this.nextId = 1;
    this.tracks = [];
  }

  // steps: frame intervals since the last frame (a live source that fell behind skipped some).
  update(detections, steps = 1) {
    const o = this.options;
    const frame = ++this.frame;
    const dets = detections.filter((d) => d.score >= o.low);
    let high = dets.filter((d) => d.score >= o.high);
    const weak = dets.filter((d) => d.score < o.high);
    for (const t of this.tracks) for (let k = 0; k < steps; k++) t.filter.predict(t.state === 'lost');

    const confirmed = this.tracks.filter((t) => t.state !== 'tentative');
    const tentative = this.tracks.filter((t) => t.state === 'tentative');

    let m = assign(confirmed, high, o.match_iou);
    for (const [i, j] of m.pairs) this.see(confirmed[i], high[j]);
    high = m.detsLeft.map((j) => high[j]);
    const still = m.tracksLeft.map((i) => confirmed[i]).filter((t) => t.state === 'tracked');
    m = assign(still, weak, o.low_match_iou);
    for (const [i, j] of m.pairs) this.see(still[i], weak[j]);
    for (const i of m.tracksLeft) still[i].state = 'lost';

    m = assign(tentative, high, o.tentative_iou);
    for (const [i, j] of m.pairs) this.see(tentative[i], high[j]);
    const dropped = new Set(m.tracksLeft.map((i) => tentative[i]));
    for (const j of m.detsLeft) {
      if (high[j].score < o.birth) continue;
      const track = new Track(high[j], frame);
      if (frame === 1 || o.confirm <= 1) this.confirm(track);
      this.tracks.push(track);
    }
    this.tracks = this.tracks.filter((t) => !dropped.has(t) && !(t.state === 'lost' && frame - t.lastFrame > o.max_lost));
    return this.tracks
      .filter((t) => t.state === 'tracked' && t.lastFrame === frame)
      .sort((a, b) => a.id - b.id)
      .map((t) => ({
        id: t.id, class_id: t.det.class_id, label: t.det.label ?? null, score: t.det.score,
        box: [...t.det.box], trail: t.trail.map(([x, y]) => [x, y]),
      }));
  }

  see(track, det) {
    track.see(det, this.frame, this.options.trail);
    if (track.state !== 'tentative') track.state = 'tracked';
    else if (track.hits >= this.options.confirm) this.confirm(track);
  }

  confirm(track) {
    track.state = 'tracked';
    track.id = this.nextId++;
  }
}

// -------------------------------------------------------------------------- counting

// > 0 when p is right of the line a -> b as seen on screen (y down), < 0 left, 0 on it.
export const side = (a, b, p) => (b[0] - a[0]) * (p[1] - a[1]) - (b[1] - a[1]) * (p[0] - a[0]);

// Whether the move p -> q crosses the segment a - b (touching counts).
export function crosses(a, b, p, q) {
  return side(a, b, p) * side(a, b, q) < 0 && side(p, q, a) * side(p, q, b) <= 0;
}

export const className = (t) => (t.label ?? String(t.class_id));

// Crossings of a drawn line a -> b per class: 'in' is a crossing to the line's right as drawn,
// 'out' to its left; each track counts at most once per direction (a box jittering on the
// line counts once).
export class LineCounter {
  constructor(a, b) {
    this.a = [...a];
    this.b = [...b];
    this.reset();
  }

  reset() {
    this.last = new Map();
    this.counted = new Set();
    this.counts = {};
  }

  update(tracks) {
    for (const t of tracks) {
      const here = t.trail[t.trail.length - 1];
      const before = this.last.get(t.id);
      this.last.set(t.id, here);
      if (!before || !crosses(this.a, this.b, before, here)) continue;
      const direction = side(this.a, this.b, here) > 0 ? 'in' : 'out';
      const key = `${t.id}:${direction}`;
      if (this.counted.has(key)) continue;
      this.counted.add(key);
      const name = className(t);
      this.counts[name] ??= {in: 0, out: 0};
      this.counts[name][direction] += 1;
    }
    return this.counts;
  }
}

// Even-odd rule: whether point p is inside the polygon [[x, y], ...].
export function inside(polygon, p) {
  let hit = false;
  for (let i = 0; i < polygon.length; i++) {
    const [x1, y1] = polygon[i];
    const [x2, y2] = polygon[(i + 1) % polygon.length];
    if ((y1 > p[1]) !== (y2 > p[1]) && p[0] < x1 + ((p[1] - y1) * (x2 - x1)) / (y2 - y1)) hit = !hit;
  }
  return hit;
}

// Tracks whose centre is inside the zone now, per class.
export function zoneCounts(polygon, tracks) {
  const counts = {};
  if (polygon.length < 3) return counts;
  for (const t of tracks) {
    if (inside(polygon, t.trail[t.trail.length - 1])) counts[className(t)] = (counts[className(t)] ?? 0) + 1;
  }
  return counts;
}

// MOTChallenge rows for one frame: frame, id, x, y, w, h, score, class.
export const motRows = (frame, tracks) =>
  tracks.map((t) => [frame, t.id, t.box[0], t.box[1], t.box[2] - t.box[0], t.box[3] - t.box[1], t.score, t.class_id]);
