// A dense model's map on the display canvas and beside it: a class map drawn translucent over
// the frame in the class colours (background left clear) with a legend of the classes it
// holds; a depth map in a colour scale (near bright, far dark) with its range, and the value
// under the pointer. Maps arrive in source pixels ({values, width, height}, contract/dense.js).
import {valueAt} from '../contract/dense.js';
import {classHsl} from './draw.js';

const CLASS_ALPHA = 0.5;
const DEPTH_ALPHA = 0.85;
// An inferno-like scale from far (0) to near (1): dark purple, red, orange, pale yellow.
const DEPTH_STOPS = [[0, 0, 4], [87, 16, 110], [188, 55, 84], [249, 142, 9], [252, 255, 164]];

// classColor's colour (ui/draw.js) as RGB.
export function classRgb(classId) {
  const [h, s, l] = classHsl(classId);
  const f = (n) => {
    const k = (n + h / 30) % 12;
    return Math.round(255 * (l - s * Math.min(l, 1 - l) * Math.max(-1, Math.min(k - 3, 9 - k, 1))));
  };
  return [f(0), f(8), f(4)];
}

export function depthRgb(t) {
  const x = Math.min(Math.max(t, 0), 1) * (DEPTH_STOPS.length - 1);
  const i = Math.min(Math.floor(x), DEPTH_STOPS.length - 2);
  const w = x - i;
  return DEPTH_STOPS[i].map((v, c) => Math.round(v + (DEPTH_STOPS[i + 1][c] - v) * w));
}

// The labels drawn clear over the frame: Ultralytics' polygon datasets add "background".
const isBackground = (label) => /^(background|bg)$/i.test(label || '');

// values: one byte a pixel (a class id, a depth step); colorOf(byte) -> [r, g, b, a].
function paint(ctx, map, colorOf, alpha, mirrored) {
  const layer = new OffscreenCanvas(map.width, map.height);
  const image = new ImageData(map.width, map.height);
  // one RGBA word per byte value, written a pixel at a time through a 32-bit view
  const table = new Uint32Array(256);
  new Uint8Array(table.buffer).set(Array.from({length: 256}, (_, v) => colorOf(v)).flat());
  const words = new Uint32Array(image.data.buffer);
  for (let i = 0; i < words.length; i++) words[i] = table[map.values[i]];
  layer.getContext('2d').putImageData(image, 0, 0);
  const {width, height} = ctx.canvas;
  ctx.save();
  if (mirrored) {
    ctx.translate(width, 0);
    ctx.scale(-1, 1);
  }
  ctx.globalAlpha = alpha;
  ctx.drawImage(layer, 0, 0, width, height);
  ctx.restore();
}

export function drawClassMap(ctx, map, labels, mirrored) {
  paint(ctx, map, (c) => (isBackground(labels[c]) ? [0, 0, 0, 0] : [...classRgb(c), 255]), CLASS_ALPHA, mirrored);
}

export function drawDepthMap(ctx, map, summary, mirrored) {
  const span = summary.max - summary.min || 1;
  // a colour per value would be one per pixel: quantised to 256 steps, as the scale shows them
  const steps = new Uint8Array(map.values.length);
  map.values.forEach((v, i) => { steps[i] = Math.round((summary.max - v) / span * 255); });
  paint(ctx, {...map, values: steps}, (s) => [...depthRgb(s / 255), 255], DEPTH_ALPHA, mirrored);
}

// The legend: a swatch, label and share per class; or the depth scale with its range.
export function showLegend(el, result) {
  el.hidden = false;
  if (result.semantic) {
    el.replaceChildren(...result.semantic.classes.map((c) => {
      const item = document.createElement('span');
      item.className = 'legend-item';
      Object.assign(item.dataset, {classId: c.class_id, label: c.label, share: c.share.toFixed(4)});
      const swatch = document.createElement('i');
      swatch.style.background = isBackground(c.label) ? 'transparent' : `rgb(${classRgb(c.class_id).join(',')})`;
      item.append(swatch, `${c.label} ${(c.share * 100).toFixed(1)}%`);
      return item;
    }));
    return;
  }
  const {min, max, mean} = result.depth;
  const bar = document.createElement('span');
  bar.className = 'legend-scale';
  bar.style.background = `linear-gradient(to right, ${DEPTH_STOPS.map((c) => `rgb(${c.join(',')})`).join(', ')})`;
  const far = document.createElement('span');
  far.textContent = `far ${max.toFixed(2)}`;
  const near = document.createElement('span');
  near.textContent = `near ${min.toFixed(2)}`;
  Object.assign(el.dataset, {min: min.toFixed(4), max: max.toFixed(4), mean: mean.toFixed(4)});
  el.replaceChildren(far, bar, near);
}

export function hideLegend(el, pointer) {
  el.hidden = true;
  el.replaceChildren();
  pointer.hidden = true;
}

// The value under the pointer: the canvas shows the map's photo at its own size, scaled by
// CSS and flipped when mirrored.
export function pointAt(canvas, event, map, mirrored) {
  const rect = canvas.getBoundingClientRect();
  let x = (event.clientX - rect.left) * (map.width / rect.width);
  const y = (event.clientY - rect.top) * (map.height / rect.height);
  if (mirrored) x = map.width - x;
  const value = valueAt(map, x, y);
  return value == null ? null : {x: Math.floor(x), y: Math.floor(y), value};
}
