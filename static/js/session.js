// Opening a model on a page: manifest, backend choice (timed or remembered), graph load
// with byte progress, warm-up; and the status panel that reports each step.
import {chooseBackend, fetchManifest, graphUrl, hasFastBackend, isLiteRtBackend, loadModel, rememberBackend, showBackend,
        tfliteArtifact, timeModel, urlOverride, useBackend, warmUp} from './runtime.js';
import {loadTflite} from './litert.js';
import {SERVER} from './server-backend.js';

export class LoadPanel {
  constructor() {
    this.panel = document.getElementById('model-status');
    this.line = document.getElementById('status-line');
    this.bar = document.getElementById('load-progress');
    this.text = document.getElementById('load-text');
  }

  status(text, state) {
    if (this.line) this.line.textContent = text;
    if (state && this.panel) this.panel.dataset.state = state;
  }

  progress(fraction) {
    if (!this.bar) return;
    this.bar.parentElement.hidden = fraction >= 1;
    this.bar.value = fraction;
    this.text.textContent = `${Math.round(fraction * 100)}%`;
  }
}

// TF.js output names -> the .tflite signature's keys (the manifest knows both).
function outputKeys(manifest) {
  const tensors = (manifest.outputs || {}).tensors || [];
  return Object.fromEntries(tensors.filter((t) => t.key).map((t) => [t.name, t.key]));
}

// The model's graph for a backend: the TF.js graph, or the .tflite on LiteRT.js.
async function loadFor(backend, manifest, part, onProgress) {
  if (isLiteRtBackend(backend)) {
    const artifact = tfliteArtifact(manifest, part);
    if (!artifact) throw new Error(`${manifest.id}'s manifest lists no .tflite for LiteRT.js (rebuild the model)`);
    return loadTflite(artifact.url, backend.replace('litert-', ''), onProgress, artifact.bytes, outputKeys(manifest));
  }
  const model = await loadModel(graphUrl(manifest, part), onProgress);
  // The converter knows whether the graph has dynamic ops (in-graph NMS): no trial run.
  if ((manifest.outputs || {}).execute === 'executeAsync') model.needsAsync = true;
  return model;
}

// A LiteRT backend that failed here is dropped from this page's choices (with its reason).
function markFailed(probed, backend, err) {
  const entry = probed.find((p) => p.name === backend);
  if (entry) Object.assign(entry, {ok: false, note: `failed: ${String(err && err.message || err).slice(0, 120)}`});
}

// -> {manifest, model, backend, reason, timings, warmMs, fallback?}
export async function openModel(modelId, probed, override, panel, part = 'model') {
  panel.status('Reading the model manifest…', 'loading');
  const manifest = await fetchManifest(modelId);
  const load = (backend) => loadFor(backend, manifest, part, (f) => panel.progress(f));
  const choice = await chooseBackend(modelId, probed, async (name) => {
    panel.status(`Timing ${name}…`);
    const model = await load(name);
    try {
      return await timeModel(model);
    } finally {
      model.dispose();
    }
  }, override);
  try {
    return {manifest, ...choice, ...await loadAndWarm(choice.backend, load, warmUp, panel)};
  } catch (err) {
    if (isLiteRtBackend(choice.backend)) {
      const reopen = () => openModel(modelId, probed, null, panel, part);
      return fallBackToTfjs(probed, choice, modelId, err, reopen);
    }
    if (choice.reason !== 'remembered') throw err;
    // A remembered backend that no longer works here (driver update, flag): choose afresh.
    rememberBackend(modelId, null);
    return openModel(modelId, probed, override, panel, part);
  }
}

// The chosen backend: load, then one warm-up run. -> {model, loadMs, warmMs}; on failure the
// model is freed and the error thrown.
async function loadAndWarm(backend, load, warm, panel) {
  let model;
  try {
    await useBackend(backend);
    panel.status(`Loading on ${backend}…`);
    const started = performance.now();
    model = await load(backend);
    const loadMs = performance.now() - started;
    panel.status('Warming up…');
    const warmMs = await warm(model);
    panel.progress(1);
    return {model, loadMs, warmMs};
  } catch (err) {
    if (model) model.dispose();
    throw err;
  }
}

// LiteRT.js could not run the model here: drop it from this page's choices and reopen on
// the TF.js backends, saying why.
async function fallBackToTfjs(probed, choice, memoryKey, err, reopen) {
  markFailed(probed, choice.backend, err);
  if (choice.reason === 'remembered' || choice.reason === 'fastest') rememberBackend(memoryKey, null);
  const opened = await reopen();
  return {...opened, fallback: `${choice.backend} failed (${err.message}), so TF.js runs it.`};
}

// The same steps for a model made of several graphs (handpose: palm detector + landmarks).
// `parts` are manifest part keys, each loaded for the backend (its TF.js graph, or its
// .tflite on LiteRT.js) under one byte-progress bar; create(graphs, manifest, backend) builds
// the page's object from them (it must expose dispose(), which frees the graphs); warm(object)
// runs it once and returns ms. Without `parts`, create(null, manifest, backend) loads what it
// needs itself (MediaPipe's own runtime) and LiteRT is not offered. `key` names the backend
// memory (default: the model id).
// -> {manifest, model, backend, reason, timings, loadMs, warmMs, fallback?}
export async function openLibraryModel(modelId, allProbed, override, panel, options) {
  const {parts, create, warm, key} = options;
  const probed = parts ? allProbed : allProbed.filter((p) => !isLiteRtBackend(p.name));
  panel.status('Reading the model manifest…', 'loading');
  const manifest = await fetchManifest(modelId);
  const load = async (backend) => {
    if (!parts) return create(null, manifest, backend);
    const litert = isLiteRtBackend(backend);
    const sizes = parts.map((part) => (litert ? (tfliteArtifact(manifest, part) || {}).bytes
      : (manifest.tfjs_bytes || {})[part]) || 1);
    const total = sizes.reduce((a, b) => a + b, 0);
    const done = parts.map(() => 0);
    const progress = (i) => (fraction) => {
      done[i] = fraction * sizes[i];
      panel.progress(done.reduce((a, b) => a + b, 0) / total);
    };
    const loads = await Promise.allSettled(parts.map((part, i) => loadFor(backend, manifest, part, progress(i))));
    const graphs = loads.filter((r) => r.status === 'fulfilled').map((r) => r.value);
    try {
      const failed = loads.find((r) => r.status === 'rejected');
      if (failed) throw failed.reason;
      return await create(graphs, manifest, backend);
    } catch (err) {
      graphs.forEach((g) => g.dispose());
      throw err;
    }
  };
  const choice = await chooseBackend(key || modelId, probed, async (name) => {
    panel.status(`Timing ${name}…`);
    const model = await load(name);
    try {
      await warm(model);
      const times = [await warm(model), await warm(model)].sort((a, b) => a - b);
      return times[0];
    } finally {
      model.dispose();
    }
  }, override);
  try {
    return {manifest, ...choice, ...await loadAndWarm(choice.backend, load, warm, panel)};
  } catch (err) {
    if (!isLiteRtBackend(choice.backend)) throw err;
    const reopen = () => openLibraryModel(modelId, allProbed, null, panel, options);
    return fallBackToTfjs(probed, choice, key || modelId, err, reopen);
  }
}

export function describeChoice(opened) {
  const how = {chosen: 'as chosen', remembered: 'remembered fastest', fastest: 'fastest measured',
               'only one': 'the only fast one here'}[opened.reason] || opened.reason;
  const timed = opened.timings
    ? ' (' + Object.entries(opened.timings).map(([k, v]) => `${k} ${Number.isFinite(v) ? v.toFixed(0) + ' ms' : 'failed'}`).join(', ') + ')'
    : '';
  const fallback = opened.fallback ? ` ${opened.fallback}` : '';
  return `${opened.manifest.title || opened.manifest.id} on ${opened.backend}, ${how}${timed}; ` +
    `warm-up ${opened.warmMs.toFixed(0)} ms.${fallback}`;
}

// ---- backend choice shared by the demo pages, the server API included ----

const NO_FAST_BACKEND = ' No fast backend works in this browser (no WebGPU, hardware WebGL or WASM), so the server runs it.';

// Options that cannot work here are disabled; ?backend= preselects.
export function setupBackendSelect(select, probed, serverIds) {
  for (const option of select.options) {
    if (option.value === SERVER) option.disabled = !serverIds.length;
    else if (option.value !== 'auto') option.disabled = !probed.some((p) => p.name === option.value && p.ok);
  }
  const forced = urlOverride('backend');
  if (forced) select.value = forced;
}

// URL > selector > (no fast browser backend and the server has the model: the server).
// -> {override: backend name or null for "fastest", server: bool, why: text}
export function chooseOverride(select, modelId, probed, serverIds) {
  const serverCan = serverIds.includes(modelId);
  // ?backend= only preselects (setupBackendSelect): the selector has the last word.
  const choice = select.value !== 'auto' ? select.value : null;
  if (choice === SERVER) return serverCan ? {override: SERVER, server: true, why: ''} : {override: null, server: false, why: ''};
  if (!choice && serverCan && !hasFastBackend(probed)) return {override: SERVER, server: true, why: NO_FAST_BACKEND};
  return {override: choice, server: false, why: ''};
}

// The "opened model" of the server backend: its manifest; the API holds the weights.
export async function openOnServer(modelId, select) {
  const manifest = await fetchManifest(modelId);
  select.value = SERVER;
  document.body.dataset.backend = SERVER;
  showBackend(SERVER);
  return {manifest, model: null, backend: SERVER, reason: 'chosen'};
}
