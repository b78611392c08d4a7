// /detect's tracking controls: the Track toggle, the counting line the user draws on the
// canvas, the live counts, and the CSV / JSON exports. The tracking itself is track.js; this
// module only wires it to the page. Everything is in source pixels (what the detector saw);
// a mirrored camera view is converted at the edges (drawing in, pointer out).
import {LineCounter, Tracker, className, motRows} from '../contract/track.js';
import {classColor} from './draw.js';

// Rows kept for the CSV (MOTChallenge: ~40 bytes a row); past this the log stops, counting goes on.
export const MAX_LOG_ROWS = 200_000;
// Frame gaps kept to know the usual one, and the most frame steps one gap may count for.
const GAPS_KEPT = 9;
const MAX_STEPS = 30;

export class TrackingPanel {
  // view: the display canvas; $: the page's getElementById; onChange(): rerun a still image.
  constructor(view, $, onChange = () => {}) {
    Object.assign(this, {view, $, onChange});
    this.tracker = new Tracker();
    this.line = null; // LineCounter, in source pixels
    this.drawing = null; // {from: [x, y] view pixels} while the user drags
    this.rows = [];
    this.tracks = [];
    this.classes = new Map(); // every class seen in this sequence: name -> class id
    this.lastTime = null; // the last frame's time (s), and the gaps between frames before it
    this.gaps = [];
    this.mirrored = false;
    this.enabled = $('track-toggle').checked;
    $('track-toggle').addEventListener('change', () => {
      this.enabled = $('track-toggle').checked;
      this.reset();
      this.onChange();
    });
    $('line-button').addEventListener('click', () => {
      this.drawing = {from: null};
      this.view.classList.add('drawing');
      this.showCounts();
    });
    $('reset-counts').addEventListener('click', () => {
      if (this.line) this.line.reset();
      this.reset();
      this.onChange();
    });
    $('tracks-csv').addEventListener('click', () => download(this.csv(), 'text/csv', 'tracks.csv'));
    $('counts-json').addEventListener('click', () => download(JSON.stringify(this.countsRecord(), null, 1),
                                                              'application/json', 'counts.json'));
    view.addEventListener('pointerdown', (e) => this.pointer(e));
    view.addEventListener('pointerup', (e) => this.pointer(e));
    this.showCounts();
  }

  // A new sequence (source, model or toggle): IDs and the log start again, the line stays.
  reset() {
    this.tracker.reset();
    this.rows = [];
    this.tracks = [];
    this.classes.clear();
    this.lastTime = null;
    this.gaps = [];
    if (this.line) this.line.reset();
    this.showCounts();
  }

  // How many usual frame intervals passed since the last frame: 1 while frames come evenly
  // (and for a file's frames, a media time apart), more after a stall of a live source, so
  // the tracker looks for each object where it has got to meanwhile.
  stepsTo(time) {
    if (time == null) return 1;
    const gap = this.lastTime == null ? null : time - this.lastTime;
    this.lastTime = time;
    if (!(gap > 0)) return 1;
    const usual = this.gaps.length >= 3 ? [...this.gaps].sort((a, b) => a - b)[this.gaps.length >> 1] : gap;
    this.gaps = [...this.gaps, gap].slice(-GAPS_KEPT);
    return Math.min(MAX_STEPS, Math.max(1, Math.round(gap / usual)));
  }

  // Pointer position -> source pixels (the canvas is scaled by CSS; a mirrored view flips x).
  toSource(e) {
    const rect = this.view.getBoundingClientRect();
    const x = ((e.clientX - rect.left) * this.view.width) / rect.width;
    const y = ((e.clientY - rect.top) * this.view.height) / rect.height;
    return [this.mirrored ? this.view.width - x : x, y];
  }

  pointer(e) {
    if (!this.drawing) return;
    if (e.type === 'pointerdown') {
      this.drawing.from = this.toSource(e);
      this.view.setPointerCapture(e.pointerId); // the drag may end outside the canvas
      return;
    }
    if (!this.drawing.from) return;
    let [a, b] = [this.drawing.from, this.toSource(e)];
    this.drawing = null;
    this.view.classList.remove('drawing');
    if (Math.hypot(b[0] - a[0], b[1] - a[1]) < 10) return; // a click, not a line
    // Mirroring flips which side is the right of the line: swap its ends to keep what the user drew.
    if (this.mirrored) [a, b] = [b, a];
    this.line = new LineCounter(a, b);
    this.view.dataset.line = [...a, ...b].map((v) => v.toFixed(1)).join(',');
    this.showCounts();
    this.onChange();
  }

  // One frame's detections -> its tracks (none while off); time: the frame's, in seconds.
  update(detections, mirrored, time = null) {
    this.mirrored = mirrored;
    if (!this.enabled) return [];
    this.tracks = this.tracker.update(detections, this.stepsTo(time));
    for (const t of this.tracks) this.classes.set(className(t), t.class_id);
    if (this.rows.length < MAX_LOG_ROWS) this.rows.push(...motRows(this.tracker.frame, this.tracks));
    if (this.line) this.line.update(this.tracks);
    this.showCounts();
    return this.tracks;
  }

  // Box key -> track ID for the results list (a track carries its detection's box).
  idsByBox() {
    return new Map(this.tracks.map((t) => [t.box.join(','), t.id]));
  }

  draw(ctx, mirrored) {
    const flip = (x) => (mirrored ? ctx.canvas.width - x : x);
    const width = Math.max(2, Math.round(ctx.canvas.width / 320));
    ctx.save();
    ctx.lineWidth = width;
    ctx.font = `bold ${Math.max(12, Math.round(ctx.canvas.width / 40))}px system-ui, sans-serif`;
    ctx.textBaseline = 'bottom';
    for (const t of this.tracks) {
      ctx.strokeStyle = ctx.fillStyle = classColor(t.class_id);
      ctx.beginPath();
      t.trail.forEach(([x, y], i) => (i ? ctx.lineTo(flip(x), y) : ctx.moveTo(flip(x), y)));
      ctx.stroke();
      const [x, y] = t.trail[t.trail.length - 1];
      ctx.beginPath();
      ctx.arc(flip(x), y, width * 2, 0, 2 * Math.PI);
      ctx.fill();
      ctx.fillText(`#${t.id}`, flip(x) + width * 3, y - width);
    }
    if (this.line) drawLine(ctx, this.line, flip, width);
    ctx.restore();
  }

  counts() {
    return this.line ? this.line.counts : {};
  }

  showCounts() {
    const table = this.$('counts');
    const rows = Object.entries(this.counts()).map(([name, c]) => {
      const tr = document.createElement('tr');
      Object.assign(tr.dataset, {label: name, in: String(c.in), out: String(c.out)});
      for (const text of [name, c.in, c.out]) tr.appendChild(document.createElement('td')).textContent = String(text);
      return tr;
    });
    table.tBodies[0].replaceChildren(...rows);
    this.$('counts-note').textContent = this.drawing ? 'Drag across the picture to draw the line.'
      : !this.enabled ? 'Turn on Track to follow objects and count them.'
        : !this.line ? 'Draw a line to count what crosses it.'
          : `Counting crossings of the line (in: to its right as drawn). ${this.tracker.nextId - 1} tracks so far.`;
    const on = this.enabled;
    for (const id of ['line-button', 'reset-counts', 'tracks-csv', 'counts-json']) this.$(id).disabled = !on;
    this.$('counts').dataset.tracks = String(this.tracker.nextId - 1);
  }

  csv() {
    const header = 'frame,id,x,y,w,h,score,class\n';
    return header + this.rows.map((r) => r.map((v, i) => (i >= 2 && i <= 6 ? v.toFixed(i === 6 ? 4 : 1) : v)).join(','))
      .join('\n') + (this.rows.length ? '\n' : '');
  }

  countsRecord() {
    return {
      line: this.line ? {from: this.line.a, to: this.line.b} : null,
      counts: this.counts(),
      frames: this.tracker.frame,
      tracks: this.tracker.nextId - 1,
      classes: Object.fromEntries(this.classes),
    };
  }
}

// The counting line with an arrow to its "in" side and its totals.
function drawLine(ctx, line, flip, width) {
  const [ax, ay] = [flip(line.a[0]), line.a[1]];
  const [bx, by] = [flip(line.b[0]), line.b[1]];
  ctx.strokeStyle = ctx.fillStyle = '#ffd400';
  ctx.lineWidth = width * 1.5;
  ctx.beginPath();
  ctx.moveTo(ax, ay);
  ctx.lineTo(bx, by);
  ctx.stroke();
  // The "in" side in source pixels is where side() > 0; on a mirrored view it is the other way.
  const [mx, my] = [(line.a[0] + line.b[0]) / 2, (line.a[1] + line.b[1]) / 2];
  const len = Math.hypot(line.b[0] - line.a[0], line.b[1] - line.a[1]) || 1;
  const [nx, ny] = [-(line.b[1] - line.a[1]) / len, (line.b[0] - line.a[0]) / len];
  const tip = [flip(mx + nx * 25), my + ny * 25];
  ctx.beginPath();
  ctx.moveTo(flip(mx), my);
  ctx.lineTo(...tip);
  ctx.stroke();
  const total = Object.values(line.counts).reduce((s, c) => [s[0] + c.in, s[1] + c.out], [0, 0]);
  ctx.fillText(`in ${total[0]} · out ${total[1]}`, tip[0] + 4, tip[1]);
}

export function download(text, type, name) {
  const a = document.createElement('a');
  a.href = URL.createObjectURL(text instanceof Blob ? text : new Blob([text], {type}));
  a.download = name;
  a.click();
  setTimeout(() => URL.revokeObjectURL(a.href), 1000);
}
