// Live detection page: camera / video / image -> letterbox -> detector -> boxes on a canvas
// and a results list; optionally tracks with IDs and a counting line (TrackingPanel). A dense
// model (semantic segmentation, depth) draws its map instead, with a legend and the value
// under the pointer. One frame in flight (FrameSource); every tensor disposed.
import {urlOverride, runModel} from '../runtime/runtime.js';
import {PageSession} from '../ui/session.js';
import {outputNames} from '../contract/manifest.js';
import {prepareInput} from '../tensor/geometry.js';
import {decode} from '../tensor/decode.js';
import {depthSummary, isDense, semanticSummary} from '../contract/dense.js';
import {decodeDense} from '../tensor/dense.js';
import {drawFrame, drawBoxes} from '../ui/draw.js';
import {drawClassMap, drawDepthMap, hideLegend, pointAt, showLegend} from '../ui/dense-view.js';
import {Hud} from '../ui/hud.js';
import {FrameSource} from '../ui/sources.js';
import {TrackingPanel, download} from '../ui/tracking-panel.js';
import {CanvasRecorder} from '../ui/recorder.js';
import {serverReady, inferOnServer, serverMap} from '../runtime/server-backend.js';
import {ModelDrop} from '../ui/model-drop.js';

const tf = globalThis.tf;
const $ = (id) => document.getElementById(id);

// The page's state: its controls write it (main), the frames read it; the session keeps
// model and backend in it (ui/session.js).
const state = {
  frames: 0,
  offered: false,      // the "server is faster" offer was shown
  map: null,           // a dense model's last map {values, width, height} (tensor/dense.js)
  mirrored: false,     // how the last frame was drawn
  score: Number($('score').value),
  iou: Number($('iou').value),
  iouInModel: false,   // NMS ran in the model (a file exported with it, or an NMS-free head)
  maxDet: maxDetOf($('max-det')),
  classes: new Set(),  // class ids to keep (none: every class)
};

const hud = new Hud($('hud'), ['preprocess', 'model', 'postprocess', 'draw']);
const view = $('view');
const ctx = view.getContext('2d');

const frames = new FrameSource({
  video: $('video'),
  process: (frame, how) => (session.onServer ? detectOnServer(frame, how) : detectInBrowser(frame, how))
    .then(() => maybeOfferServer()),
  ready: () => session.opened && (!session.onServer || serverReady()),
  onMessage: showMessage,
  onLoop: () => {
    hud.reset();
    tracking.reset();
  },
  onProgress: showFileProgress,
});

// A file run frame by frame: how far it is (data-done / data-total for tests and scripts).
function showFileProgress(done, total, fps) {
  const bar = $('file-progress');
  Object.assign(bar, {max: total, value: done});
  Object.assign(bar.dataset, {done: String(done), total: String(total), fps: String(fps)});
  $('file-progress-row').hidden = false;
  $('file-progress-text').textContent = done < total ? `frame ${done} of ${total} (${fps} fps file)`
    : `all ${total} frames processed (${fps} fps file)`;
}

const session = new PageSession({
  task: 'detect',
  state,
  serverNote: ' (frames go as JPEG, one at a time)',
  busy: () => frames.busy,
  stop: () => frames.stopLoop(),
  opened: ({manifest}) => {
    fillClassFilter(manifest.labels);
    applyNmsDefaults(manifest);
    showTaskControls(manifest);
  },
  restart: () => frames.restart(),
});

const rerunImage = () => frames.kind === 'image' && frames.runImage();
if (urlOverride('track') === '1') $('track-toggle').checked = true;
const tracking = new TrackingPanel(view, $, rerunImage);
const recorder = new CanvasRecorder(view);

function maxDetOf(input) {
  return Math.max(1, Number(input.value) || Number(input.defaultValue));
}

function options() {
  return {
    score: state.score,
    // NMS ran in the model (a file exported with it, or an NMS-free head): none on top.
    iou: state.iouInModel ? 1 : state.iou,
    maxDet: state.maxDet,
    classes: new Set(state.classes),
  };
}

function showMessage(text) {
  const el = $('camera-message');
  el.hidden = !text;
  el.textContent = text || '';
}

// A dense model's results: its classes by share, or its depth range.
function denseItems(result) {
  const item = (text) => Object.assign(document.createElement('li'), {textContent: text});
  if (result.semantic) {
    return result.semantic.classes.map((c) => {
      const li = item(`${c.label} ${(c.share * 100).toFixed(1)}% of the picture`);
      Object.assign(li.dataset, {classId: c.class_id, label: c.label, share: c.share.toFixed(6), pixels: c.pixels});
      return li;
    });
  }
  const {min, max, mean} = result.depth;
  const li = item(`depth ${min.toFixed(2)} (nearest) to ${max.toFixed(2)} (farthest), mean ${mean.toFixed(2)}`);
  Object.assign(li.dataset, {min: min.toFixed(6), max: max.toFixed(6), mean: mean.toFixed(6)});
  return [li];
}

function renderResults(result, trackIds) {
  const list = $('results');
  if (result.semantic || result.depth) {
    list.replaceChildren(...denseItems(result));
    showLegend($('map-legend'), result);
  } else list.replaceChildren(...result.detections.map((d) => {
    const li = document.createElement('li');
    const id = trackIds.get(d.box.join(','));
    if (id != null) li.dataset.trackId = String(id);
    li.dataset.classId = d.class_id;
    li.dataset.label = d.label;
    li.dataset.score = d.score.toFixed(4);
    li.dataset.box = d.box.map((v) => v.toFixed(1)).join(',');
    // A YOLO task's extras, points as "x,y" joined by ";" (polygons by "|")
    const points = (pts) => pts.map((p) => p.map((v) => +v.toFixed(2)).join(',')).join(';');
    if (d.polygons) li.dataset.polygons = d.polygons.map(points).join('|');
    if (d.keypoints) li.dataset.keypoints = points(d.keypoints);
    if (d.corners) li.dataset.corners = points(d.corners);
    if (d.angle != null) li.dataset.angle = d.angle.toFixed(5);
    li.textContent = `${id != null ? `#${id} ` : ''}${d.label} ${(d.score * 100).toFixed(0)}% — [${d.box.map((v) => Math.round(v)).join(', ')}]`;
    return li;
  }));
  list.dataset.frame = String(state.frames);
  list.dataset.count = String(result.detections.length);
  list.dataset.width = String(result.image.width);
  list.dataset.height = String(result.image.height);
}

// Draw the inferred frame with its boxes, list the results, update the HUD.
function show(frame, result, mirrored, timing, t0) {
  const t = performance.now();
  if (view.width !== frame.width || view.height !== frame.height) {
    view.width = frame.width;
    view.height = frame.height;
  }
  drawFrame(ctx, frame.canvas, mirrored);
  state.mirrored = mirrored;
  if (result.semantic) drawClassMap(ctx, state.map, session.opened.manifest.labels, mirrored);
  if (result.depth) drawDepthMap(ctx, state.map, result.depth, mirrored);
  tracking.update(result.detections, mirrored, frame.time);
  const trackIds = tracking.idsByBox();
  drawBoxes(ctx, result.detections.map((d) => (trackIds.has(d.box.join(','))
    ? {...d, label: `#${trackIds.get(d.box.join(','))} ${d.label}`} : d)), mirrored);
  tracking.draw(ctx, mirrored);
  state.frames += 1;
  renderResults(result, trackIds);
  timing.draw = performance.now() - t;
  hud.frame(timing);
  const list = $('results');
  list.dataset.totalMs = (performance.now() - t0).toFixed(2);
  // each stage's ms too (data-preprocess-ms, data-model-ms, ...), for benches and tests
  for (const [stage, ms] of Object.entries(timing)) list.dataset[`${stage}Ms`] = ms.toFixed(2);
  if (!document.body.dataset.firstResultMs) document.body.dataset.firstResultMs = performance.now().toFixed(0);
  return result;
}

// One frame through the whole pipeline in the browser; returns the shared result schema.
async function detectInBrowser(frame, {mirrored}) {
  const {manifest, model} = session.opened;
  const t0 = performance.now();
  const prepared = prepareInput(frame.canvas, manifest.input);
  const t1 = performance.now();
  let outputs;
  try {
    outputs = await runModel(model, prepared.input, outputNames(manifest));
  } finally {
    prepared.input.dispose();
  }
  outputs = Array.isArray(outputs) ? outputs : [outputs];
  const t2 = performance.now();
  const found = {detections: []};
  try {
    if (isDense(manifest)) {
      state.map = await decodeDense(manifest, outputs, {...prepared, width: frame.width, height: frame.height});
      if (manifest.outputs.format === 'yolo-semantic') found.semantic = semanticSummary(state.map, manifest.labels);
      else found.depth = depthSummary(state.map);
    } else found.detections = await decode(manifest, outputs, prepared, options());
  } finally {
    tf.dispose(outputs);
  }
  const timing = {preprocess: t1 - t0, model: t2 - t1, postprocess: performance.now() - t2};
  const result = {model: manifest.id, image: {width: frame.width, height: frame.height}, ...found,
                  timing_ms: timing};
  return show(frame, result, mirrored, timing, t0);
}

// The same frame through the server API (the "Server" backend).
async function detectOnServer(frame, {mirrored, file}) {
  const t0 = performance.now();
  const opts = options();
  // The server applies the class filter by the same rule as contract/decode.js (before NMS).
  const params = {score: opts.score, iou: opts.iou, max_det: opts.maxDet};
  if (opts.classes.size) params.classes = Array.from(opts.classes).join(',');
  const result = await inferOnServer('detect', session.opened.manifest.id, frame.canvas, frame.width, frame.height,
                                     params, file);
  const entry = result.semantic || result.depth;
  if (entry) state.map = await serverMap(entry);
  return show(frame, result, mirrored, {preprocess: 0, model: performance.now() - t0, postprocess: 0}, t0);
}

// After a few frames on a browser backend, time one server round trip; if the server
// would be faster, offer it (once).
async function maybeOfferServer() {
  // Only a live source has a frame rate worth comparing.
  if (state.offered || session.onServer || frames.kind === 'image' || state.frames < 10 || hud.fps == null) return;
  const modelId = session.opened.manifest.id;
  if (!session.serverIds.includes(modelId)) return;
  state.offered = true;
  try {
    const started = performance.now();
    await inferOnServer('detect', modelId, frames.canvas, frames.canvas.width, frames.canvas.height);
    const serverFps = 1000 / (performance.now() - started);
    // A message already shown (a camera that failed meanwhile, say) matters more than the offer.
    if (serverFps > hud.fps * 1.2 && $('camera-message').hidden) {
      showMessage(`The server runs this model at about ${serverFps.toFixed(1)} FPS here, ` +
                  `this browser at ${hud.fps.toFixed(1)} FPS. Choose "Server" as the backend to use it.`);
    }
  } catch { /* no offer */ }
}

function fillClassFilter(labels) {
  const select = $('class-filter');
  select.replaceChildren(...labels.map((label, i) => new Option(label, String(i))));
  state.classes = new Set();
}

// Sliders start at the manifest's thresholds; an in-graph NMS has its IoU baked in and
// never returns scores below its floor. A file whose NMS ran inside it (where: 'model')
// gets no second NMS, as predict() gives it none.
function applyNmsDefaults(manifest) {
  const nms = manifest.nms || {};
  const inGraph = manifest.outputs.format === 'nms';
  const inModel = nms.where === 'model';
  $('iou').disabled = inGraph || inModel;
  $('iou').dataset.inModel = inModel ? '1' : '';
  state.iouInModel = inModel;
  if (nms.iou != null) {
    $('iou').value = nms.iou;
    state.iou = Number($('iou').value);   // as the slider holds it (within its range and step)
    $('iou-value').textContent = inModel ? 'in the model' : inGraph ? `${nms.iou} (in model)` : String(nms.iou);
  }
  $('score').min = inGraph && nms.score != null ? nms.score : 0.05;
  state.score = Number($('score').value);   // a new minimum moves the slider's value up to it
}

// A dense model has no boxes: the thresholds, class filter and tracking do not apply to it.
function showTaskControls(manifest) {
  const dense = isDense(manifest);
  for (const id of ['score', 'max-det', 'class-filter', 'track-toggle']) $(id).disabled = dense;
  $('counting').hidden = dense;
  if (dense) {
    $('iou').disabled = true;
    if ($('track-toggle').checked) $('track-toggle').click();
  }
  $('results-title').textContent = {'yolo-semantic': 'Classes', 'yolo-depth': 'Depth'}[manifest.outputs.format]
    || 'Detections';
  state.map = null;
  hideLegend($('map-legend'), $('map-pointer'));
}

// The class or depth under the pointer (or a finger on a phone).
function showPointer(event) {
  const pointer = $('map-pointer');
  const hit = state.map && pointAt(view, event, state.map, state.mirrored);
  pointer.hidden = !hit;
  if (!hit) return;
  const {manifest} = session.opened;
  const what = manifest.outputs.format === 'yolo-depth' ? `depth ${hit.value.toFixed(2)}`
    : manifest.labels[hit.value] ?? String(hit.value);
  pointer.textContent = `${what} at (${hit.x}, ${hit.y})`;
  Object.assign(pointer.dataset, {x: hit.x, y: hit.y, value: String(hit.value)});
}

function downloadSnapshot() {
  view.toBlob((blob) => {
    const a = document.createElement('a');
    a.href = URL.createObjectURL(blob);
    a.download = `detections-${new Date().toISOString().replace(/[:.]/g, '-')}.png`;
    a.click();
    setTimeout(() => URL.revokeObjectURL(a.href), 1000);
  }, 'image/png');
}

async function toggleRecording() {
  const button = $('record-button');
  if (!recorder.recording) {
    recorder.start();
    button.textContent = 'Stop recording';
    button.dataset.recording = '1';
    return;
  }
  button.disabled = true;
  const video = await recorder.stop();
  download(video, 'video/webm', `detections-${new Date().toISOString().replace(/[:.]/g, '-')}.webm`);
  Object.assign(button, {textContent: 'Record (WebM)', disabled: false});
  delete button.dataset.recording;
}

// The controls work from the first moment: a file picked or the camera started while the
// model loads waits for it (FrameSource), instead of being dropped.
async function main() {
  frames.wire($, (kind) => {
    if (!kind) return;
    $('pause-button').disabled = kind === 'image';
    $('snapshot-button').disabled = false;
    $('record-button').disabled = kind === 'image' || !CanvasRecorder.supported();
    $('drop-hint').hidden = true;
    if (kind !== 'video' || !frames.everyFrame) $('file-progress-row').hidden = true;
  });
  frames.everyFrame = urlOverride('every_frame') === '1';
  $('every-frame').checked = frames.everyFrame;
  $('every-frame').addEventListener('change', () => {
    frames.everyFrame = $('every-frame').checked;
    if (!frames.everyFrame) $('file-progress-row').hidden = true;
    if (frames.kind === 'video') frames.restart();
  });
  $('snapshot-button').addEventListener('click', downloadSnapshot);
  $('record-button').addEventListener('click', toggleRecording);
  for (const id of ['score', 'iou']) {
    $(id).addEventListener('input', () => {
      state[id] = Number($(id).value);
      $(`${id}-value`).textContent = $(id).value;
      rerunImage();
    });
  }
  // Each keystroke counts for the live frames; an image reruns once the number is in.
  $('max-det').addEventListener('input', () => { state.maxDet = maxDetOf($('max-det')); });
  $('max-det').addEventListener('change', () => {
    state.maxDet = maxDetOf($('max-det'));
    rerunImage();
  });
  view.addEventListener('pointermove', showPointer);
  view.addEventListener('pointerdown', showPointer);
  $('class-filter').addEventListener('change', () => {
    state.classes = new Set(Array.from($('class-filter').selectedOptions).map((o) => Number(o.value)));
    rerunImage();
  });

  // Your own model (a .tflite or a TF.js folder, dropped or picked), kept from an earlier
  // visit or given now.
  const drop = new ModelDrop(session, 'detect', $);
  frames.onModelFiles = (files) => drop.give(files);
  await drop.start();

  // A live demo starts live: the camera opens while the model loads, unless the page was
  // asked not to or has no model yet (none installed, none of yours kept).
  if (urlOverride('camera') !== '0' && $('model-select').options.length) $('camera-button').click();
  await session.start();
}

main().catch((err) => {
  session.panel.status(`Could not start: ${err.message}`, 'error');
  console.error(err);
});
