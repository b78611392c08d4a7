// Classification page: images (picker, drop, paste, camera snapshot) -> one card each with
// the top-5 classes. Preprocessing follows the manifest; top-k by index, ties by index.
import {probeBackends, pageData, runModel} from './runtime.js';
import {SERVER, serverModels, inferOnServer} from './server-backend.js';
import {LoadPanel, describeChoice, openForPage, setupBackendSelect} from './session.js';
import {prepareInput} from './geometry.js';
import {openCamera, stopStream, decodeImage, acceptFiles} from './inputs.js';

const tf = globalThis.tf;
const $ = (id) => document.getElementById(id);
const TOP_K = 5;

const state = {opened: null, probed: [], queue: Promise.resolve(), done: 0, serverModels: []};
const panel = new LoadPanel();

// Indices of the k largest values; equal values keep index order (stable, no indexOf).
export function topK(values, k) {
  const order = Array.from(values, (_, i) => i);
  order.sort((a, b) => (values[b] - values[a]) || (a - b));
  return order.slice(0, k);
}

function softmax(logits) {
  const max = Math.max(...logits);
  const exps = logits.map((v) => Math.exp(v - max));
  const sum = exps.reduce((a, b) => a + b, 0);
  return exps.map((v) => v / sum);
}

// One image -> the shared result schema {model, image, top, timing_ms}.
async function classify(source) {
  const {manifest, model} = state.opened;
  const t0 = performance.now();
  const frame = prepareInput(source, manifest.input);
  const t1 = performance.now();
  let output;
  let values;
  try {
    output = await runModel(model, frame.input);
    const tensor = Array.isArray(output) ? output[0] : output;
    values = Array.from(await tensor.data());
  } finally {
    frame.input.dispose();
    if (output) tf.dispose(output);
  }
  const t2 = performance.now();
  if (manifest.outputs.format === 'logits') values = softmax(values);
  const top = topK(values, TOP_K).map((i) => ({class_id: i, label: manifest.labels[i], probability: values[i]}));
  return {model: manifest.id, image: {width: frame.width, height: frame.height}, top,
          timing_ms: {preprocess: t1 - t0, model: t2 - t1, postprocess: performance.now() - t2}};
}

function newCard(name) {
  const card = document.createElement('article');
  card.className = 'result-card';
  card.dataset.file = name;
  card.dataset.state = 'pending';
  const title = document.createElement('h3');
  title.textContent = name;
  const body = document.createElement('div');
  body.className = 'body';
  body.textContent = 'Waiting…';
  card.append(title, body);
  $('cards').prepend(card);
  return card;
}

function fillCard(card, img, result) {
  img.alt = card.dataset.file;
  const list = document.createElement('ol');
  list.className = 'top5';
  for (const t of result.top) {
    const li = document.createElement('li');
    li.dataset.classId = t.class_id;
    li.dataset.label = t.label;
    li.dataset.probability = String(t.probability);
    const name = document.createElement('span');
    name.textContent = t.label;
    const pct = document.createElement('span');
    pct.className = 'pct';
    pct.textContent = `${(t.probability * 100).toFixed(1)}%`;
    const bar = document.createElement('span');
    bar.className = 'bar';
    const fill = document.createElement('span');
    fill.style.width = `${(t.probability * 100).toFixed(1)}%`;
    bar.append(fill);
    li.append(name, pct, bar);
    list.append(li);
  }
  const ms = document.createElement('p');
  ms.className = 'ms';
  ms.textContent = `${result.timing_ms.model.toFixed(1)} ms model · ${result.image.width}×${result.image.height} px · ${state.opened.backend}`;
  card.dataset.backend = state.opened.backend;
  card.querySelector('.body').replaceChildren(img, list, ms);
  card.dataset.state = 'done';
  card.dataset.ms = result.timing_ms.model.toFixed(2);
  card.dataset.preprocessMs = result.timing_ms.preprocess.toFixed(2);
}

function failCard(card, message) {
  const p = document.createElement('p');
  p.className = 'error';
  p.textContent = message;
  card.querySelector('.body').replaceChildren(p);
  card.dataset.state = 'error';
}

// Each image goes through the queue alone: one inference at a time, cards in order.
// preview(bitmap) returns the element shown on the card.
function enqueue(name, getBitmap, preview, file = null) {
  const card = newCard(name);
  state.queue = state.queue.then(async () => {
    let bitmap;
    const started = performance.now();
    try {
      bitmap = await getBitmap();
      const decodeMs = performance.now() - started;
      const result = state.opened.backend === SERVER
        ? await inferOnServer('classify', state.opened.manifest.id, bitmap, bitmap.width, bitmap.height,
                              {top_k: TOP_K}, file)
        : await classify(bitmap);
      fillCard(card, preview(bitmap), result);
      card.dataset.decodeMs = decodeMs.toFixed(2);
      card.dataset.totalMs = (performance.now() - started).toFixed(2);
    } catch (err) {
      failCard(card, err.message);
    } finally {
      if (bitmap) bitmap.close();
      state.done += 1;
      $('cards').dataset.done = String(state.done);
      $('hud').textContent = `${state.done} image(s) · tensors ${tf.memory().numTensors}`;
      $('hud').dataset.numTensors = String(tf.memory().numTensors);
    }
  });
  return state.queue;
}

// A file previews as itself (an object URL: no re-encoding); it is revoked on Clear.
function filePreview(file) {
  return () => {
    const img = document.createElement('img');
    img.src = URL.createObjectURL(file);
    return img;
  };
}

// A camera frame previews as a small canvas copy (the bitmap is closed afterwards).
function bitmapPreview(bitmap) {
  const scale = Math.min(1, 480 / Math.max(bitmap.width, bitmap.height));
  const canvas = document.createElement('canvas');
  canvas.width = Math.round(bitmap.width * scale);
  canvas.height = Math.round(bitmap.height * scale);
  canvas.getContext('2d').drawImage(bitmap, 0, 0, canvas.width, canvas.height);
  return canvas;
}

function clearCards() {
  for (const img of $('cards').querySelectorAll('img')) URL.revokeObjectURL(img.src);
  $('cards').replaceChildren();
}

function addFiles(files) {
  for (const file of files) enqueue(file.name || 'pasted image', () => decodeImage(file), filePreview(file), file);
}

async function snapshot() {
  const video = $('video');
  try {
    if (!video.srcObject) await openCamera(video);
    $('camera-message').hidden = true;
  } catch (err) {
    $('camera-message').hidden = false;
    $('camera-message').textContent = err.message;
    return;
  }
  enqueue(`camera ${new Date().toLocaleTimeString()}`, () => createImageBitmap(video), bitmapPreview);
}

async function openSelectedModel() {
  if (state.opened && state.opened.model) state.opened.model.dispose();
  state.opened = null;
  const {opened, why} = await openForPage($('model-select').value, $('backend-select'), state.probed,
                                         state.serverModels, panel);
  state.opened = opened;
  panel.status(opened.backend === SERVER
    ? `${opened.manifest.title} on the server: each image is sent as it is, and not kept.${why}`
    : describeChoice(opened), 'ready');
}

async function main() {
  if (!(pageData().models || []).length) return;
  [state.probed, state.serverModels] = await Promise.all([probeBackends(), serverModels('classify')]);
  setupBackendSelect($('backend-select'), state.probed, state.serverModels);
  await openSelectedModel();
  $('image-files').addEventListener('change', (e) => {
    addFiles(Array.from(e.target.files));
    e.target.value = '';
  });
  acceptFiles($('dropzone'), addFiles);
  $('camera-button').addEventListener('click', snapshot);
  $('clear-button').addEventListener('click', clearCards);
  // Queued behind the images in flight; a failed open is reported and the queue goes on.
  const reopen = () => {
    state.queue = state.queue.then(openSelectedModel)
      .catch((err) => panel.status(`Could not load: ${err.message}`, 'error'));
  };
  $('model-select').addEventListener('change', reopen);
  $('backend-select').addEventListener('change', reopen);
  window.addEventListener('pagehide', () => stopStream($('video')));
}

main().catch((err) => {
  panel.status(`Could not start: ${err.message}`, 'error');
  console.error(err);
});
