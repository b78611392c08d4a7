// Live detection page: camera / video / image -> letterbox -> detector -> boxes on a canvas
// and a results list. One frame in flight; every tensor disposed.
import {probeBackends, urlOverride, pageData, runModel, fetchManifest, hasFastBackend, showBackend} from './runtime.js';
import {LoadPanel, openModel, describeChoice} from './session.js';
import {prepareInput} from './geometry.js';
import {decode, outputNames} from './detector.js';
import {drawFrame, drawBoxes} from './draw.js';
import {Hud} from './hud.js';
import {openCamera, stopStream, openVideoFile, decodeImage, acceptFiles, onVideoFrames, CameraError} from './inputs.js';
import {SERVER, serverModels, serverReady, inferOnServer} from './server-backend.js';

const tf = globalThis.tf;
const $ = (id) => document.getElementById(id);

const state = {
  opened: null,        // {manifest, model, backend, ...}
  probed: [],
  source: null,        // 'camera' | 'video' | 'image'
  image: null,         // ImageBitmap for the image source
  busy: false,
  paused: false,
  frames: 0,
  stopLoop: null,
  lastResult: null,
  serverModels: [],    // ids the server API can run
  offered: false,      // the "server is faster" offer was shown
};

const hud = new Hud($('hud'), ['preprocess', 'model', 'postprocess', 'draw']);
const panel = new LoadPanel();
const view = $('view');
const ctx = view && view.getContext('2d');   // absent when no model is installed
const grab = document.createElement('canvas');   // the frame being inferred, drawn with its boxes
const grabCtx = grab.getContext('2d', {willReadFrequently: true});  // CPU-backed: fast pixel reads

function options() {
  const selected = Array.from($('class-filter').selectedOptions).map((o) => Number(o.value));
  return {
    score: Number($('score').value),
    iou: Number($('iou').value),
    maxDet: Math.max(1, Number($('max-det').value) || 100),
    classes: new Set(selected),
  };
}

function showMessage(text) {
  const el = $('camera-message');
  el.hidden = !text;
  el.textContent = text || '';
}

function renderResults(result) {
  const list = $('results');
  list.replaceChildren(...result.detections.map((d) => {
    const li = document.createElement('li');
    li.dataset.classId = d.class_id;
    li.dataset.label = d.label;
    li.dataset.score = d.score.toFixed(4);
    li.dataset.box = d.box.map((v) => v.toFixed(1)).join(',');
    li.textContent = `${d.label} ${(d.score * 100).toFixed(0)}% — [${d.box.map((v) => Math.round(v)).join(', ')}]`;
    return li;
  }));
  list.dataset.frame = String(state.frames);
  list.dataset.count = String(result.detections.length);
  list.dataset.width = String(result.image.width);
  list.dataset.height = String(result.image.height);
}

// One frame through the whole pipeline; returns the shared result schema.
async function processFrame(source, mirrored) {
  const {manifest, model} = state.opened;
  const t0 = performance.now();
  const width = source.videoWidth || source.width;
  const height = source.videoHeight || source.height;
  if (grab.width !== width || grab.height !== height) {
    grab.width = width;
    grab.height = height;
  }
  grabCtx.drawImage(source, 0, 0, width, height);
  const frame = prepareInput(grab, manifest.input);
  const t1 = performance.now();
  let outputs;
  try {
    outputs = await runModel(model, frame.input, outputNames(manifest));
  } finally {
    frame.input.dispose();
  }
  outputs = Array.isArray(outputs) ? outputs : [outputs];
  const t2 = performance.now();
  let detections;
  try {
    detections = await decode(manifest, outputs, frame, options());
  } finally {
    tf.dispose(outputs);
  }
  const t3 = performance.now();
  if (view.width !== width || view.height !== height) {
    view.width = width;
    view.height = height;
  }
  drawFrame(ctx, grab, mirrored);
  drawBoxes(ctx, detections, mirrored);
  state.frames += 1;
  const timing = {preprocess: t1 - t0, model: t2 - t1, postprocess: t3 - t2};
  const result = {model: manifest.id, image: {width, height}, detections, timing_ms: timing};
  renderResults(result);
  timing.draw = performance.now() - t3;
  hud.frame(timing);
  $('results').dataset.totalMs = (performance.now() - t0).toFixed(2);
  if (!document.body.dataset.firstResultMs) document.body.dataset.firstResultMs = performance.now().toFixed(0);
  state.lastResult = result;
  return result;
}

// The same frame through the server API (the "Server" backend).
async function processFrameOnServer(source, mirrored, file = null) {
  const {manifest} = state.opened;
  const t0 = performance.now();
  const width = source.videoWidth || source.width;
  const height = source.videoHeight || source.height;
  if (grab.width !== width || grab.height !== height) {
    grab.width = width;
    grab.height = height;
  }
  grabCtx.drawImage(source, 0, 0, width, height);
  const opts = options();
  const result = await inferOnServer('detect', manifest.id, grab, width, height,
                                     {score: opts.score, iou: opts.iou, max_det: opts.maxDet}, file);
  if (opts.classes.size) result.detections = result.detections.filter((d) => opts.classes.has(d.class_id));
  const t1 = performance.now();
  if (view.width !== width || view.height !== height) {
    view.width = width;
    view.height = height;
  }
  drawFrame(ctx, grab, mirrored);
  drawBoxes(ctx, result.detections, mirrored);
  state.frames += 1;
  renderResults(result);
  hud.frame({preprocess: 0, model: t1 - t0, postprocess: 0, draw: performance.now() - t1});
  $('results').dataset.totalMs = (performance.now() - t0).toFixed(2);
  if (!document.body.dataset.firstResultMs) document.body.dataset.firstResultMs = performance.now().toFixed(0);
  state.lastResult = result;
  return result;
}

function onServer() {
  return state.opened && state.opened.backend === SERVER;
}

// After a few frames on a browser backend, time one server round trip; if the server
// would be faster, offer it (once).
async function maybeOfferServer() {
  if (state.offered || onServer() || state.frames < 10 || hud.fps == null) return;
  if (!state.serverModels.includes(state.opened.manifest.id)) return;
  state.offered = true;
  try {
    const started = performance.now();
    await inferOnServer('detect', state.opened.manifest.id, grab, grab.width, grab.height);
    const serverFps = 1000 / (performance.now() - started);
    if (serverFps > hud.fps * 1.2) {
      showMessage(`The server runs this model at about ${serverFps.toFixed(1)} FPS here, ` +
                  `this browser at ${hud.fps.toFixed(1)} FPS. Choose "Server" as the backend to use it.`);
    }
  } catch (err) { /* no offer */ }
}

function stopLoop() {
  if (state.stopLoop) state.stopLoop();
  state.stopLoop = null;
}

function startVideoLoop(video, mirrored) {
  stopLoop();
  hud.reset();
  state.stopLoop = onVideoFrames(video, () => {
    if (state.busy || state.paused || !state.opened) return;   // never two frames in flight
    if (onServer() && !serverReady()) return;                   // bounded request rate
    state.busy = true;
    (onServer() ? processFrameOnServer(video, mirrored) : processFrame(video, mirrored))
      .then(() => maybeOfferServer())
      .catch((err) => showMessage(`Detection failed: ${err.message}`))
      .finally(() => { state.busy = false; });
  });
}

async function runImage() {
  if (!state.image || !state.opened) return;
  while (state.busy) await new Promise((r) => setTimeout(r, 10));
  state.busy = true;
  try {
    await (onServer() ? processFrameOnServer(state.image, false, state.imageFile)
                      : processFrame(state.image, false));
  } finally {
    state.busy = false;
  }
}

function enableSourceControls() {
  $('pause-button').disabled = state.source === 'image';
  $('snapshot-button').disabled = false;
  $('drop-hint').hidden = true;
}

async function startCamera() {
  const video = $('video');
  try {
    await openCamera(video);
  } catch (err) {
    showMessage(err instanceof CameraError ? err.message : `Camera failed: ${err.message}`);
    return false;
  }
  showMessage('');
  state.source = 'camera';
  enableSourceControls();
  startVideoLoop(video, true);   // selfie view: mirrored like a mirror
  return true;
}

async function useFiles(files) {
  const file = files[0];
  if (!file) return;
  const video = $('video');
  try {
    if (file.type.startsWith('video/')) {
      stopStream(video);
      await openVideoFile(video, file);
      state.source = 'video';
      enableSourceControls();
      startVideoLoop(video, false);
    } else {
      const image = await decodeImage(file);
      stopLoop();
      stopStream(video);
      video.pause();
      if (state.image) state.image.close();
      state.image = image;
      state.imageFile = file;   // the server path sends the upload itself, not a re-encode
      state.source = 'image';
      enableSourceControls();
      await runImage();
    }
    showMessage('');
  } catch (err) {
    showMessage(err.message);
  }
}

function fillClassFilter(labels) {
  const select = $('class-filter');
  select.replaceChildren(...labels.map((label, i) => new Option(label, String(i))));
}

// Sliders start at the manifest's thresholds; an in-graph NMS has its IoU baked in and
// never returns scores below its floor.
function applyNmsDefaults(manifest) {
  const nms = manifest.nms || {};
  const inGraph = manifest.outputs.format === 'nms';
  $('iou').disabled = inGraph;
  if (nms.iou != null) {
    $('iou').value = nms.iou;
    $('iou-value').textContent = inGraph ? `${nms.iou} (in model)` : String(nms.iou);
  }
  $('score').min = inGraph && nms.score != null ? nms.score : 0.05;
}

async function openSelectedModel() {
  stopLoop();
  if (state.opened && state.opened.model) state.opened.model.dispose();
  state.opened = null;
  const modelId = $('model-select').value;
  const choice = $('backend-select').value;
  let override = urlOverride('backend') || (choice !== 'auto' ? choice : null);
  const serverCan = state.serverModels.includes(modelId);
  let why = '';
  if (!override && serverCan && !hasFastBackend(state.probed)) {
    // No GPU backend and no WASM: the CPU backend would take seconds a frame.
    override = SERVER;
    why = ' No fast backend works in this browser (no WebGPU, hardware WebGL or WASM), so the server runs it.';
  }
  if (override === SERVER && serverCan) {
    state.opened = {manifest: await fetchManifest(modelId), model: null, backend: SERVER, reason: 'chosen'};
    $('backend-select').value = SERVER;
    fillClassFilter(state.opened.manifest.labels);
    applyNmsDefaults(state.opened.manifest);
    panel.status(`${state.opened.manifest.title} on the server (frames go as JPEG, one at a time).${why}`, 'ready');
    document.body.dataset.backend = SERVER;
    showBackend(SERVER);
    return;
  }
  if (override === SERVER) override = null;   // the server lacks this model: choose in the browser
  state.opened = await openModel(modelId, state.probed, override, panel);
  fillClassFilter(state.opened.manifest.labels);
  applyNmsDefaults(state.opened.manifest);
  panel.status(describeChoice(state.opened), 'ready');
  document.body.dataset.backend = state.opened.backend;
}

async function main() {
  const models = pageData().models || [];
  if (!models.length) return;
  [state.probed, state.serverModels] = await Promise.all([probeBackends(), serverModels('detect')]);
  for (const option of $('backend-select').options) {
    if (option.value === SERVER) option.disabled = !state.serverModels.length;
    else if (option.value !== 'auto') option.disabled = !state.probed.some((p) => p.name === option.value && p.ok);
  }
  const forced = urlOverride('backend');
  if (forced) $('backend-select').value = forced;
  await openSelectedModel();

  $('camera-button').addEventListener('click', startCamera);
  $('video-file').addEventListener('change', (e) => useFiles(Array.from(e.target.files)));
  $('image-file').addEventListener('change', (e) => useFiles(Array.from(e.target.files)));
  acceptFiles($('stage'), useFiles);
  $('pause-button').addEventListener('click', () => {
    state.paused = !state.paused;
    $('pause-button').textContent = state.paused ? 'Resume' : 'Pause';
  });
  $('snapshot-button').addEventListener('click', () => {
    view.toBlob((blob) => {
      const a = document.createElement('a');
      a.href = URL.createObjectURL(blob);
      a.download = `detections-${new Date().toISOString().replace(/[:.]/g, '-')}.png`;
      a.click();
      setTimeout(() => URL.revokeObjectURL(a.href), 1000);
    }, 'image/png');
  });
  for (const id of ['score', 'iou']) {
    $(id).addEventListener('input', () => {
      $(`${id}-value`).textContent = $(id).value;
      if (state.source === 'image') runImage();
    });
  }
  $('max-det').addEventListener('change', () => state.source === 'image' && runImage());
  $('class-filter').addEventListener('change', () => state.source === 'image' && runImage());
  const reopen = async () => {
    const source = state.source;
    await openSelectedModel();
    if (source === 'image') await runImage();
    else if (source) startVideoLoop($('video'), source === 'camera');
  };
  $('model-select').addEventListener('change', reopen);
  $('backend-select').addEventListener('change', reopen);

  // A live demo starts live: open the camera unless the page was asked not to.
  if (urlOverride('camera') !== '0') await startCamera();
}

main().catch((err) => {
  panel.status(`Could not start: ${err.message}`, 'error');
  console.error(err);
});
