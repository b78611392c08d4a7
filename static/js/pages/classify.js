// Classification page: images (picker, drop, paste, camera snapshot) -> one card each with
// the top-5 classes; the live camera -> top-5 bars updating, one frame in flight (FrameSource);
// your own classes (Teach): the model's feature output matched against your examples
// (custom_classes.js). Preprocessing follows the manifest; top-k by index, ties by index
// (scores.js).
import {runModel} from '../runtime/runtime.js';
import {SERVER, serverReady, inferOnServer} from '../runtime/server-backend.js';
import {PageSession} from '../ui/session.js';
import {outputTensors} from '../contract/manifest.js';
import {prepareInput} from '../tensor/geometry.js';
import {openCamera, stopStream, decodeImage, acceptFiles} from '../ui/inputs.js';
import {FrameSource} from '../ui/sources.js';
import {ExamplesPanel} from '../ui/examples-panel.js';
import {CLASS_SETS} from '../contract/custom_classes.js';
import {softmax, topK} from '../contract/scores.js';
import {ModelDrop} from '../ui/model-drop.js';
import {areModelFiles} from '../runtime/model-file.js';

const tf = globalThis.tf;
const $ = (id) => document.getElementById(id);
const TOP_K = 5;

// The page's state (the session keeps model and backend in it: ui/session.js).
const state = {queue: Promise.resolve(), classesRead: false, done: 0, live: null, liveFrames: 0};

// The live camera's frames: one in flight, each once the model is open, your classes read
// and (on the server backend) a request may go. Before the camera opens, messages are the
// camera's (#camera-message); once the live panel shows, they are the loop's (#live-ms).
const frames = new FrameSource({
  video: $('video'),
  process: (frame) => liveFrame(frame, session.opened),
  ready: () => Boolean(session.opened) && state.classesRead && (session.opened.backend !== SERVER || serverReady()),
  onMessage: showMessage,
  onLoop: () => { $('live').hidden = false; },
});

// Images wait in state.queue and run on the model through session.use(); a live frame is
// frames.busy.
const session = new PageSession({
  task: 'classify',
  state,
  serverNote: ': each image is sent as it is, and not kept',
  busy: () => frames.busy,
});
let yours = null;   // "Your classes" (made in main: the panel is there only with a model)

function showMessage(text) {
  if (!$('live').hidden) {
    if (text) $('live-ms').textContent = text;
    return;
  }
  $('camera-message').hidden = !text;
  $('camera-message').textContent = text;
}

// The manifest's outputs by role: the probabilities (the first, or keyed so) and the
// pooled features (keyed 'features', where the build has them).
function outputRoles(manifest) {
  const tensors = outputTensors(manifest);
  const probabilities = Math.max(0, tensors.findIndex((t) => !t.key || t.key === 'probabilities'));
  return {names: tensors.map((t) => t.name), probabilities, features: tensors.findIndex((t) => t.key === 'features')};
}

function hasFeatures(opened) {
  return opened.backend !== SERVER && outputRoles(opened.manifest).features >= 0;
}

// One image -> the shared result schema {model, image, top, timing_ms} and the features
// (Float32Array, or null when the build has no such output).
async function classify({manifest, model}, source) {
  const roles = outputRoles(manifest);
  const t0 = performance.now();
  const frame = prepareInput(source, manifest.input);
  const t1 = performance.now();
  let output;
  let values;
  let features = null;
  try {
    output = await runModel(model, frame.input, roles.names.length > 1 ? roles.names : undefined);
    const list = Array.isArray(output) ? output : [output];
    values = Array.from(await list[roles.probabilities].data());
    if (roles.features >= 0) features = await list[roles.features].data();
  } finally {
    frame.input.dispose();
    if (output) tf.dispose(output);
  }
  const t2 = performance.now();
  if (manifest.outputs.format === 'logits') values = softmax(values);
  const top = topK(values, TOP_K).map((i) => ({class_id: i, label: manifest.labels[i], probability: values[i]}));
  return {model: manifest.id, image: {width: frame.width, height: frame.height}, top, features,
          timing_ms: {preprocess: t1 - t0, model: t2 - t1, postprocess: performance.now() - t2}};
}

// An image on any backend -> the result (the server's answer has no features).
function classifyAny(opened, source, file = null) {
  return opened.backend === SERVER
    ? inferOnServer('classify', opened.manifest.id, source, source.width, source.height, {top_k: TOP_K}, file)
    : classify(opened, source);
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
  body.textContent = session.opened ? 'Waiting…' : 'Waiting for the model to load (see the status line)…';
  card.append(title, body);
  $('cards').prepend(card);
  return card;
}

function fillTop5(list, top) {
  list.replaceChildren();
  for (const t of top) {
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
}

function customText(match) {
  return match ? `Yours: ${match.name} ${(match.confidence * 100).toFixed(0)}%` : '';
}

function fillCard(card, img, result, match, backend) {
  img.alt = card.dataset.file;
  const list = document.createElement('ol');
  list.className = 'top5';
  fillTop5(list, result.top);
  const mine = document.createElement('p');
  mine.className = 'card-custom';
  mine.textContent = customText(match);
  card.dataset.custom = match ? match.name : '';
  const ms = document.createElement('p');
  ms.className = 'ms';
  ms.textContent = `${result.timing_ms.model.toFixed(1)} ms model · ${result.image.width}×${result.image.height} px · ${backend}`;
  card.dataset.backend = backend;
  card.querySelector('.body').replaceChildren(img, mine, list, ms);
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
      const {result, backend} = await session.use(async (opened) => ({
        result: await classifyAny(opened, bitmap, file), backend: opened.backend}));
      const match = result.features ? yours.match(result.features) : null;
      fillCard(card, preview(bitmap), result, match, backend);
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

// ---- the live camera: one frame in flight, top-5 and your classes updating ----

// frame: FrameSource's copy of the video frame ({canvas, width, height}).
async function liveFrame(frame, opened) {
  const started = performance.now();
  const result = await classifyAny(opened, frame.canvas);
  const [match] = await yours.update(result.features ? [result.features] : []);
  state.liveFrames += 1;
  const list = $('live-top5');
  fillTop5(list, result.top);
  list.dataset.frames = String(state.liveFrames);
  list.dataset.backend = opened.backend;
  const mine = $('live-custom');
  mine.dataset.custom = match ? match.name : '';
  mine.dataset.confidence = match ? match.confidence.toFixed(2) : '';
  mine.textContent = yours.set.classes.length && !result.features
    ? 'Your classes need a browser backend and a model with a feature output.' : customText(match);
  $('live-ms').textContent = `${(performance.now() - started).toFixed(0)} ms a frame · ${opened.backend}`;
}

async function startLive() {
  const live = state.live = {};   // this start (a Stop and a new start meanwhile make another)
  $('live-button').setAttribute('aria-pressed', 'true');
  $('live-button').textContent = 'Stop live';
  if (!(await frames.startCamera()) && state.live === live) stopLive();
}

function stopLive() {
  state.live = null;
  frames.attempt = {};   // a camera still opening yields (FrameSource.startCamera)
  frames.stopLoop();
  frames.kind = null;
  stopStream($('video'));
  $('live').hidden = true;
  $('live-button').setAttribute('aria-pressed', 'false');
  $('live-button').textContent = 'Live camera';
}

// Your classes from images: each image's features, as examples of the class named.
async function teachFromFiles(files) {
  const name = $('custom-name').value;
  const vectors = [];
  state.queue = state.queue.then(() => session.use(async (opened) => {
    if (!hasFeatures(opened)) {
      yours.say('Your classes need a browser backend and a model with a feature output (EfficientNet-Lite0, or a YOLO classifier converted here: an Ultralytics .tflite gives probabilities only).', 'error');
      return;
    }
    for (const file of files) {
      let bitmap;
      try {
        bitmap = await decodeImage(file);
        vectors.push((await classify(opened, bitmap)).features);
      } catch (err) {
        yours.say(`${file.name}: ${err.message}`, 'error');
      } finally {
        if (bitmap) bitmap.close();
      }
    }
    await yours.addVectors(name, vectors);
  })).catch((err) => yours.say(err.message, 'error'));
  return state.queue;
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

async function main() {
  yours = new ExamplesPanel($, {
    sets: CLASS_SETS, key: 'image-classes', file: 'classes.json', isLive: () => Boolean(state.live) && frames.kind === 'camera',
    stillHint: 'Start the live camera to record, or add images of the class.',
  });
  // Your classes take part in every result: read first (images and teaching queue behind it).
  state.queue = yours.load().then(() => { state.classesRead = true; });
  // The controls work from the first moment: images picked while the model loads wait in
  // the queue (their cards say so) and run once it is open (session.use).
  const takeImages = () => {
    addFiles(Array.from($('image-files').files));
    $('image-files').value = '';
  };
  $('image-files').addEventListener('change', takeImages);
  if ($('image-files').files.length) takeImages();   // picked before this module ran
  // Your own model (a .tflite or a TF.js folder, dropped or picked), kept from an earlier visit
  // or given now; a model dropped among the images goes there too.
  const drop = new ModelDrop(session, 'classify', $);
  acceptFiles($('dropzone'), (files) => (areModelFiles(files) ? drop.give(files) : addFiles(files)));
  await drop.start();
  $('camera-button').addEventListener('click', snapshot);
  $('live-button').addEventListener('click', () => (state.live ? stopLive() : startLive()));
  $('custom-files').addEventListener('change', (e) => {
    teachFromFiles(Array.from(e.target.files));
    e.target.value = '';
  });
  acceptFiles($('custom-panel'), teachFromFiles, {paste: false});
  $('clear-button').addEventListener('click', clearCards);
  window.addEventListener('pagehide', stopLive);
  if (new URLSearchParams(location.search).get('live') === '1') startLive();
  await session.start();
}

main().catch((err) => {
  session.panel.status(`Could not start: ${err.message}`, 'error');
  console.error(err);
});
