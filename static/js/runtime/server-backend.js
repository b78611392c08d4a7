// The "Server" backend: the same model run by the Flask API (/api/v1/<task>), for browsers
// whose own backends are missing or slower. Frames go downscaled as JPEG, one request in
// flight, at a bounded rate; results come back in the shared schema and are rescaled to
// the source frame's pixels.

export const SERVER = 'server';
const MAX_SIDE = 640;          // the detector's input size: sending more only costs bandwidth
const JPEG_QUALITY = 0.85;
const MIN_INTERVAL_MS = 100;   // at most 10 requests a second per page
const SERVER_TYPES = /^image\/(jpeg|png|webp)$/;

let lastSentAt = 0;
let uploadLimit = 0;

// The API's request body limit, as the page was rendered with it (server/pages.py; null: no
// limit): the page's session sets it. A page without it sends every file re-encoded.
export function setUploadLimit(limit) {
  uploadLimit = limit === null ? Infinity : Number(limit) || 0;
}

function maxUploadBytes() {
  return uploadLimit;
}

// What to tell the user when a request to the server fails without an answer (offline,
// or the server is down): the browser backends keep working from the offline copy.
export function unreachableMessage() {
  const why = navigator.onLine === false ? 'this device is offline' : 'the network or the server is down';
  return `The server cannot be reached (${why}). The Server backend needs it; ` +
    'the other backends run in this browser, offline too.';
}

export class ServerUnreachable extends Error {}

// fetch that turns a network failure into unreachableMessage() instead of "Failed to fetch".
async function fetchServer(url, init) {
  try {
    return await fetch(url, init);
  } catch {
    throw new ServerUnreachable(unreachableMessage());
  }
}

// Model ids of a task that the server can run (from /api/v1/models). Unreachable: none,
// and onUnreachable(why) is told (the page's backend selector says why "Server" is off).
export async function serverModels(task, onUnreachable = () => {}) {
  try {
    const response = await fetchServer('/api/v1/models');
    if (!response.ok) return [];
    const {models} = await response.json();
    return models.filter((m) => m.task === task).map((m) => m.id);
  } catch (err) {
    if (err instanceof ServerUnreachable) onUnreachable(err.message);
    return [];
  }
}

async function encodeFrame(source, width, height) {
  const scale = Math.min(1, MAX_SIDE / Math.max(width, height));
  const canvas = new OffscreenCanvas(Math.max(1, Math.round(width * scale)), Math.max(1, Math.round(height * scale)));
  canvas.getContext('2d').drawImage(source, 0, 0, canvas.width, canvas.height);
  let blob;
  try {
    blob = await canvas.convertToBlob({type: 'image/jpeg', quality: JPEG_QUALITY});
  } catch {
    throw new Error('could not encode the frame');
  }
  return {blob, sentWidth: canvas.width, sentHeight: canvas.height};
}

// Whether a new request may go now (the caller keeps one in flight).
export function serverReady() {
  return performance.now() - lastSentAt >= MIN_INTERVAL_MS;
}

// POST one frame; returns the API's result with coordinates in source pixels. `file`:
// send that original file instead of a re-encoded frame (an upload is already compressed).
export async function inferOnServer(task, modelId, source, width, height, params = {}, file = null) {
  lastSentAt = performance.now();
  // The API decodes JPEG, PNG and WebP up to its upload limit; anything else the browser
  // could decode (GIF, BMP, AVIF, a huge photo) goes as a re-encoded frame.
  const sendAsIs = file && SERVER_TYPES.test(file.type) && file.size <= maxUploadBytes();
  const {blob, sentWidth, sentHeight} = sendAsIs
    ? {blob: file, sentWidth: width, sentHeight: height}
    : await encodeFrame(source, width, height);
  const query = new URLSearchParams({model: modelId});
  for (const [k, v] of Object.entries(params)) if (v != null) query.set(k, String(v));
  const started = performance.now();
  const response = await fetchServer(`/api/v1/${task}?${query}`, {
    method: 'POST', headers: {'Content-Type': blob.type || 'image/jpeg'}, body: blob,
  });
  // A proxy or gateway in between may answer with a page, not our JSON error.
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(body.error ? body.error.message : `server answered ${response.status}`);
  const sx = width / sentWidth;
  const sy = height / sentHeight;
  for (const d of body.detections || []) d.box = [d.box[0] * sx, d.box[1] * sy, d.box[2] * sx, d.box[3] * sy];
  for (const h of body.hands || []) h.keypoints = h.keypoints.map(([x, y]) => [x * sx, y * sy]);
  body.image = {width, height};
  body.timing_ms = {...(body.timing_ms || {}), round_trip: performance.now() - started};
  return body;
}

// A result's "semantic" or "depth" entry -> its map {values, width, height}, as decodeDense
// gives it: the PNG's grey level is a class id, or a depth step of the range (the browser
// decodes a 16-bit PNG to 8 bits: depth comes back to 1/255 of the range here).
export async function serverMap(entry) {
  const bytes = Uint8Array.from(atob(entry.map.data), (c) => c.charCodeAt(0));
  const bitmap = await createImageBitmap(new Blob([bytes], {type: 'image/png'}),
                                         {colorSpaceConversion: 'none', premultiplyAlpha: 'none'});
  const canvas = new OffscreenCanvas(bitmap.width, bitmap.height);
  const ctx = canvas.getContext('2d');
  ctx.drawImage(bitmap, 0, 0);
  bitmap.close();
  const rgba = ctx.getImageData(0, 0, canvas.width, canvas.height).data;
  const count = canvas.width * canvas.height;
  const depth = entry.map.encoding === 'png16';
  const values = depth ? new Float32Array(count) : new Uint8Array(count);
  const step = depth ? (entry.max - entry.min) / 255 : 1;
  for (let i = 0; i < count; i++) values[i] = depth ? entry.min + rgba[i * 4] * step : rgba[i * 4];
  return {values, width: canvas.width, height: canvas.height};
}
