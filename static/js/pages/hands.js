// Hand pose page: camera / video / image -> MediaPipe Hands (tensor/hands.js: the steps of
// @tensorflow-models/hand-pose-detection's 'tfjs' runtime, on our converted TF.js graphs or
// on the same .tflite files with LiteRT.js) -> 21 keypoints, skeleton, handedness and a
// gesture (gesture.js: MediaPipe Gesture Recognizer's seven). One frame in flight; the pipeline disposes its tensors.
// `?runtime=mediapipe` runs the library on MediaPipe's own runtime instead (the benchmark's peer).
//
// Handedness: MediaPipe's model assumes a mirrored (selfie) picture. Camera frames, video
// files and ordinary photos reach the model unmirrored (only the camera *preview* is drawn
// mirrored), so the model's 'Left' is the person's right hand: the page reports the person's
// real hand (data-handedness) and keeps the model's raw label (data-model-handedness).
import {urlOverride, isLiteRtBackend, modelRunner} from '../runtime/runtime.js';
import {serverReady, inferOnServer} from '../runtime/server-backend.js';
import {PageSession} from '../ui/session.js';
import {pageData} from '../ui/page.js';
import {drawFrame, drawHand, drawEmoji} from '../ui/draw.js';
import {Hud} from '../ui/hud.js';
import {FrameSource} from '../ui/sources.js';
import {GESTURES, GestureTracker, classifyGesture} from '../contract/gesture.js';
import {outputNames} from '../contract/hands.js';
import {HandPipeline} from '../tensor/hands.js';
import {ExamplesPanel} from '../ui/examples-panel.js';
import {GESTURE_SETS, normaliseHand} from '../contract/custom_gestures.js';
import TWINS from '../contract/twins.json' with {type: 'json'};

const $ = (id) => document.getElementById(id);

const MEDIAPIPE_PATH = '/vendor/mediapipe-hands';
const LIBRARY_SCRIPT = '/vendor/hand-pose-detection/hand-pose-detection.min.js';
const COLORS = {Left: '#ff8c1a', Right: '#1f9bff'};
const SWAP = TWINS.hands.person_handedness;   // the model's label -> the person's hand

// The page's state: its options' controls write it (main), the frames read it; the session
// keeps model and backend in it (ui/session.js).
const state = {
  runtime: urlOverride('runtime') === 'mediapipe' ? 'mediapipe' : 'tfjs',
  frames: 0,
  loaded: false,   // your gestures are read (they take part in every frame)
  variant: 'full',
  maxHands: 2,
  score: 0.5,      // the palm detection score
};

const hud = new Hud($('hud'), ['grab', 'estimate', 'gesture', 'draw']);
const tracker = new GestureTracker({frames: 3});
const view = $('view');
const ctx = view ? view.getContext('2d') : null;

let yours = null;   // "Your gestures" (made in main: the panel is there only with a model)

const frames = new FrameSource({
  video: $('video'),
  process: (frame, how) => processFrame(frame, how),
  ready: () => state.loaded && session.opened && (!session.onServer || serverReady()),
  onMessage: showMessage,
  onLoop: () => {
    hud.reset();
    tracker.reset();
    if (session.opened && session.opened.model && session.opened.model.reset) session.opened.model.reset();
  },
});

// The model (session.opened.model): a HandPipeline, or the library's detector on MediaPipe's
// runtime (which has no server twin and no answer check); null on the server.
const session = new PageSession({
  task: 'handpose',
  state,
  server: state.runtime === 'tfjs',
  serverNote: ' (frames go as JPEG, one at a time)',
  busy: () => frames.busy,
  stop: () => {
    frames.stopLoop();
    tracker.reset();
  },
  options: openOptions,
  opened: (opened, {variant, maxHands}) => Object.assign(opened, {variant, maxHands}),
  restart: () => frames.restart(),
  label: (opened, {variant}) => `${state.runtime === 'mediapipe' ? 'MediaPipe runtime (WASM + WebGL), ' : ''}${variant} · `,
});

function showMessage(text) {
  const el = $('camera-message');
  el.hidden = !text;
  el.textContent = text || '';
}

function settings() {
  return {variant: state.variant, maxHands: state.maxHands, score: state.score};
}

// ---- the hand pipeline on the chosen backend's graphs (or the library on MediaPipe's runtime) ----

function loadScript(src) {
  if (document.querySelector(`script[src="${src}"]`)) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const script = document.createElement('script');
    script.src = src;
    script.onload = resolve;
    script.onerror = () => reject(new Error(`could not load ${src}`));
    document.head.appendChild(script);
  });
}

// The benchmark's peer: hand-pose-detection on MediaPipe's WASM + WebGL solution, served
// locally. Its palm score threshold is the library's fixed 0.5.
async function createMediaPipeDetector({variant, maxHands}) {
  await loadScript(LIBRARY_SCRIPT);
  await loadScript(`${MEDIAPIPE_PATH}/hands.js`);
  const hpd = globalThis.handPoseDetection;
  return hpd.createDetector(hpd.SupportedModels.MediaPipeHands,
                            {runtime: 'mediapipe', solutionPath: MEDIAPIPE_PATH, modelType: variant, maxHands});
}

// graphs: [palm detector, landmark model] as loaded for `backend` (TF.js graphs or LiteRT
// .tflite); their output names differ, the manifest says which is which.
function createDetector(graphs, manifest, backend, {variant, maxHands, parts}) {
  if (state.runtime === 'mediapipe') return createMediaPipeDetector({variant, maxHands});
  const names = outputNames(manifest, isLiteRtBackend(backend));
  return new HandPipeline({palm: modelRunner(graphs[0], names.detector), landmark: modelRunner(graphs[1], names.landmark),
                           manifest, maxHands, parts});
}

// MediaPipe's runtime before the first real frame: one blank frame (our pipeline warms up
// on the answer check's pattern instead).
async function warmMediaPipe(detector) {
  const started = performance.now();
  const blank = document.createElement('canvas');
  blank.width = 256;
  blank.height = 256;
  blank.getContext('2d').fillRect(0, 0, 256, 256);
  await detector.estimateHands(blank, {staticImageMode: true, flipHorizontal: false});
  detector.reset();
  return performance.now() - started;
}

// The model parts of the chosen variant, on either runtime (ui/session.js opens them).
function openOptions() {
  const s = settings();
  const parts = [`detector_${s.variant}`, `landmark_${s.variant}`];
  Object.assign(session.panel.panel.dataset, {variant: s.variant, runtime: state.runtime});
  return {
    parts: state.runtime === 'mediapipe' ? null : parts,
    create: (graphs, manifest, backend) => createDetector(graphs, manifest, backend, {...s, parts}),
    answer: state.runtime === 'mediapipe' ? null : (pipeline) => pipeline.answer(),
    warm: warmMediaPipe,
    key: `${state.model}.${state.runtime}.${s.variant}`,
    variant: s.variant,
    maxHands: s.maxHands,
  };
}

// ---- one frame ----

function toResultHand(hand, gesture) {
  const modelLabel = hand.handedness;
  return {
    handedness: SWAP[modelLabel] || modelLabel,
    model_handedness: modelLabel,
    score: hand.score,
    gesture,
    keypoints: hand.keypoints.map((k) => [k.x, k.y]),
  };
}

function draw(frame, result, mirrored) {
  drawFrame(ctx, frame.canvas, mirrored);
  for (const hand of result.hands) {
    const color = COLORS[hand.handedness] || '#fff';
    drawHand(ctx, hand.keypoints, color, mirrored, `${hand.handedness} ${(hand.score * 100).toFixed(0)}%`);
    const emoji = GESTURES[hand.gesture].emoji;
    if (!emoji) continue;
    // Above the hand if there is room, else below it; always inside the frame.
    const xs = hand.keypoints.map((k) => k[0]);
    const ys = hand.keypoints.map((k) => k[1]);
    const {width, height} = ctx.canvas;
    const size = Math.max(28, Math.min(160, (Math.max(...ys) - Math.min(...ys)) * 0.45, width / 4, height / 4));
    const clamp = (v, hi) => Math.min(Math.max(v, size * 0.6), hi - size * 0.6);
    const above = Math.min(...ys) - size * 0.6;
    const y = above >= size * 0.6 ? above : Math.max(...ys) + size * 0.6;
    drawEmoji(ctx, emoji, clamp((Math.min(...xs) + Math.max(...xs)) / 2, width), clamp(y, height), size, mirrored);
  }
}

function renderResults(result) {
  const list = $('results');
  list.replaceChildren(...result.hands.map((hand, i) => {
    const li = document.createElement('li');
    li.dataset.index = String(i);
    li.dataset.handedness = hand.handedness;
    li.dataset.modelHandedness = hand.model_handedness;
    li.dataset.score = hand.score.toFixed(4);
    li.dataset.gesture = hand.gesture;
    li.dataset.custom = hand.custom ? hand.custom.name : '';
    li.dataset.keypoints = hand.keypoints.map(([x, y]) => `${x.toFixed(1)},${y.toFixed(1)}`).join(';');
    const g = GESTURES[hand.gesture];
    const emoji = document.createElement('span');
    emoji.className = 'gesture-emoji';
    emoji.textContent = g.emoji;
    const text = document.createElement('span');
    text.className = 'hand-text';
    const mine = hand.custom ? ` — yours: ${hand.custom.name} ${(hand.custom.confidence * 100).toFixed(0)}%` : '';
    text.textContent = `${hand.handedness} hand ${(hand.score * 100).toFixed(0)}%${g.label ? ` — ${g.label}` : ''}${mine}`;
    li.style.setProperty('--hand-color', COLORS[hand.handedness] || '#888');
    li.append(emoji, text);
    return li;
  }));
  Object.assign(list.dataset, {
    frame: String(state.frames), count: String(result.hands.length), width: String(result.image.width),
    height: String(result.image.height), source: frames.kind || '', image: frames.name,
    model: result.model, variant: result.variant, runtime: state.runtime,
  });
  // The badge: the first hand showing a gesture, yours first (the result list has every hand's).
  const shown = result.hands.find((h) => h.custom) || result.hands.find((h) => h.gesture !== 'none');
  const badge = $('gesture');
  badge.dataset.gesture = shown ? shown.gesture : 'none';
  if (shown && shown.custom) badge.dataset.custom = shown.custom.name;
  else delete badge.dataset.custom;
  badge.querySelector('.gesture-emoji').textContent = shown ? GESTURES[shown.gesture].emoji : '';
  badge.querySelector('.gesture-label').textContent = shown
    ? (shown.custom ? shown.custom.name : GESTURES[shown.gesture].label) : '';
}

// A grabbed frame -> the shared result schema {model, image, hands: [...], timing_ms}.
async function processFrame(frame, {mirrored, live, file, source}) {
  const {manifest, model: detector, variant} = session.opened;
  const {width, height} = frame;
  const t1 = performance.now();
  const t0 = t1 - frame.grabMs;
  let found;
  let serverGestures = null;   // a still image on the server: its gesture verdicts as they are
  if (session.onServer) {
    const s = settings();
    const answer = await inferOnServer('hands', manifest.id, frame.canvas, width, height,
                                       {variant, max_det: s.maxHands, detect_score: s.score}, file);
    // Back to the library's shape (model labels, {x, y} points) so one code path follows.
    found = answer.hands.map((h) => ({handedness: h.model_handedness, score: h.score,
                                      keypoints: h.keypoints.map(([x, y]) => ({x, y}))}));
    if (!live) serverGestures = answer.hands.map((h) => h.gesture);
  } else if (state.runtime === 'mediapipe') {
    // MediaPipe's own runtime decides static vs tracking by the input's type: give it the video.
    found = await detector.estimateHands(live ? source : frame.canvas, {staticImageMode: !live, flipHorizontal: false});
  } else {
    found = await detector.estimateHands(frame.canvas, {staticImageMode: !live, detectionScore: settings().score});
  }
  const t2 = performance.now();
  const world = (h) => (h.keypoints3D ? h.keypoints3D.map((k) => [k.x, k.y, k.z]) : null);
  // Live: stabilised per hand over frames (hysteresis); a still image: one verdict.
  const gestures = serverGestures || (live
    ? tracker.update(found.map((h) => ({key: h.handedness, points: h.keypoints, world: world(h)}))).map((g) => g.gesture)
    : found.map((h) => classifyGesture(h.keypoints, {world: world(h)}).gesture));
  const hands = found.map((h, i) => toResultHand(h, gestures[i]));
  const custom = await yours.update(hands.map((h) => normaliseHand(h.keypoints, h.handedness)));
  hands.forEach((h, i) => { h.custom = custom[i]; });
  const t3 = performance.now();
  if (view.width !== width || view.height !== height) {
    view.width = width;
    view.height = height;
  }
  state.frames += 1;
  const timing = {grab: frame.grabMs, estimate: t2 - t1, gesture: t3 - t2};
  const result = {model: manifest.id, variant, image: {width, height}, hands, timing_ms: timing};
  draw(frame, result, mirrored);
  renderResults(result);
  timing.draw = performance.now() - t3;
  hud.frame(timing);
  // Raw per-frame figures for benchmarks (the HUD shows smoothed ones).
  const list = $('results');
  list.dataset.totalMs = (performance.now() - t0).toFixed(2);
  list.dataset.timing = JSON.stringify(Object.fromEntries(Object.entries(timing).map(([k, v]) => [k, +v.toFixed(2)])));
  return result;
}

async function main() {
  const models = pageData().models || [];
  if (!models.length) return;
  const variant = urlOverride('variant');
  if (variant === 'full' || variant === 'lite') $('variant-select').value = variant;
  const score = Number(urlOverride('score'));
  if (score > 0 && score < 1) {
    $('score').value = String(score);
    $('score-value').textContent = $('score').value;
  }
  const maxHands = urlOverride('hands');
  if (maxHands === '1' || maxHands === '2') $('max-hands').value = maxHands;
  // The options as their controls hold them now; from here on each control writes its own.
  Object.assign(state, {variant: $('variant-select').value, maxHands: Number($('max-hands').value) || 2,
                        score: Number($('score').value)});
  $('variant-select').addEventListener('change', () => { state.variant = $('variant-select').value; });
  $('max-hands').addEventListener('change', () => { state.maxHands = Number($('max-hands').value) || 2; });
  yours = new ExamplesPanel($, {
    sets: GESTURE_SETS, key: 'hand-gestures', file: 'gestures.json',
    isLive: () => frames.kind === 'camera' || frames.kind === 'video',
    onChange: () => { if (frames.kind === 'image') frames.runImage(); },
  });
  // The controls work from the first moment: a file picked or the camera started while the
  // model loads waits for it (FrameSource's ready), instead of being dropped.
  frames.wire($, (kind) => {
    if (!kind) return;
    $('pause-button').disabled = kind === 'image';
    $('drop-hint').hidden = true;
  });
  $('score').addEventListener('input', () => {
    state.score = Number($('score').value);
    $('score-value').textContent = $('score').value;
    if (frames.kind === 'image') frames.runImage();
  });

  // A live demo starts live: the camera opens while the model loads, unless the page was
  // asked not to.
  if (urlOverride('camera') !== '0') $('camera-button').click();
  await Promise.all([session.start($('variant-select'), $('max-hands')), yours.load().then(() => { state.loaded = true; })]);
}

main().catch((err) => {
  session.panel.status(`Could not start: ${err.message}`, 'error');
  console.error(err);
});
