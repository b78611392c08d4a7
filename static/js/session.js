// Opening a model on a page: manifest, backend choice (answer-checked and timed, or
// remembered), graph load with byte progress, warm-up on the answer check's pattern; and the
// status panel that reports each step.
import {NoRightBackend, chooseBackend, fetchManifest, graphUrl, hasFastBackend, isLiteRtBackend, loadModel,
        rememberBackend, runModel, showBackend, tfliteArtifact, urlOverride, useBackend} from './runtime.js';
import {loadTflite} from './litert.js';
import {describeCheck, formatError, graphRoles, judge, modelInput, recordCheck, wrongBackends} from './answers.js';
import {SERVER} from './server-backend.js';

const tf = globalThis.tf;

export class LoadPanel {
  constructor() {
    this.panel = document.getElementById('model-status');
    this.line = document.getElementById('status-line');
    this.bar = document.getElementById('load-progress');
    this.text = document.getElementById('load-text');
    this.warning = document.getElementById('answer-warning');
  }

  // A backend's wrong answers, shown until the next open (null hides it).
  warn(text) {
    if (!this.warning) return;
    this.warning.hidden = !text;
    this.warning.textContent = text || '';
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

// One open at a time (each switches the global TF.js backend): reopen() queues open(),
// then after(), behind any open still running; a failure is reported on the panel.
export function serialOpener(panel, open, after = async () => {}) {
  let chain = Promise.resolve();
  return () => {
    chain = chain.then(async () => {
      await open();
      await after();
    }).catch((err) => panel.status(`Could not load: ${err.message}`, 'error'));
    return chain;
  };
}

// Resolves once busy() is false: a model is freed only after the frame in flight on it.
export async function frameDone(busy) {
  while (busy()) await new Promise((resolve) => setTimeout(resolve, 10));
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

// A one-graph model's answer on the check pattern: {model: {role: TypedArray}} (answers.js).
// A build without a record (or without named outputs) still runs once, as a warm-up: null.
export async function graphAnswer(model, manifest) {
  const roles = manifest.answer_check ? graphRoles(manifest) : [];
  const input = modelInput(manifest.input);
  let outputs;
  try {
    outputs = await runModel(model, input, roles.length ? roles.map((r) => r.name) : undefined);
    // One tensor, a list, or (structured outputs, no names asked) a map of them.
    outputs = outputs instanceof tf.Tensor ? [outputs] : Object.values(outputs);
    const data = await Promise.all(outputs.map((t) => t.data()));
    return roles.length ? {model: Object.fromEntries(roles.map((r, i) => [r.role, data[i]]))} : null;
  } finally {
    input.dispose();
    if (outputs) tf.dispose(outputs);
  }
}

// The model's graphs for a backend under one byte-progress bar: `parts` are manifest part
// keys (each its TF.js graph, or its .tflite on LiteRT.js); create(graphs, manifest, backend)
// builds the page's object from them (its dispose() frees the graphs). Without parts,
// create(null, manifest, backend) loads what it needs itself.
async function loadParts(backend, manifest, parts, create, panel) {
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
}

// The worse of two verdicts (null: not checked).
function worse(a, b) {
  if (!a || !b) return a || b;
  return b.error > a.error || !(a.error >= 0) ? b : a;
}

// Opens a model for the page: manifest, backend choice, load, one warm-up run on the answer
// check's pattern whose answer is judged against the manifest's record (answers.js).
// options: parts (manifest part keys, default ['model']; null: create loads itself and
// LiteRT is not offered), create(graphs, manifest, backend) (default: the one graph),
// answer(model, manifest) -> {part: {role: TypedArray}} (default graphAnswer; null: no check,
// warm(model) -> ms warms it up instead), key (backend memory, default the model id).
// A backend whose answer is off is never chosen, is remembered as wrong for this build and
// is skipped next time; forced (`override`), it runs with opened.warning saying so.
// -> {manifest, model, backend, reason, timings?, checks?, check, loadMs, warmMs, warning?, fallback?}
export async function openModel(modelId, allProbed, override, panel, options = {}) {
  const {parts = ['model'], create = (graphs) => graphs[0], key = modelId, warm} = options;
  const answer = 'answer' in options ? options.answer : graphAnswer;
  const probed = parts ? allProbed : allProbed.filter((p) => !isLiteRtBackend(p.name));
  panel.status('Reading the model manifest…', 'loading');
  panel.warn(null);
  const manifest = await fetchManifest(modelId);
  const load = (backend) => loadParts(backend, manifest, parts, create, panel);
  // One run: warms the backend up and, where the build has a record, judges its answer.
  const run = async (model) => {
    if (!answer) return {ms: await warm(model), check: null};
    const started = performance.now();
    const check = judge(manifest, await answer(model, manifest));
    return {ms: performance.now() - started, check};
  };
  const timeOne = async (name) => {
    panel.status(`Timing ${name}…`);
    const model = await load(name);
    try {
      const runs = [await run(model), await run(model), await run(model)];
      // Every run is judged: a backend right only on its first run is still wrong.
      return {ms: Math.min(runs[1].ms, runs[2].ms), check: runs.map((r) => r.check).reduce(worse)};
    } finally {
      model.dispose();
    }
  };
  const choice = await chooseBackend(key, probed, timeOne, override, wrongBackends(key, manifest));
  for (const [name, check] of Object.entries(choice.checks || {})) {
    recordCheck(key, manifest, name, {check, ms: Number.isFinite(choice.timings[name]) ? choice.timings[name] : null});
  }
  let opened;
  try {
    opened = await loadAndWarm(choice.backend, load, run, panel);
  } catch (err) {
    if (isLiteRtBackend(choice.backend)) {
      return fallBackToTfjs(probed, choice, key, err, () => openModel(modelId, allProbed, null, panel, options));
    }
    if (choice.reason !== 'remembered') throw err;
    // A remembered backend that no longer works here (driver update, flag): choose afresh.
    rememberBackend(key, null);
    return openModel(modelId, allProbed, override, panel, options);
  }
  const timed = (choice.timings || {})[choice.backend];
  const trusted = !opened.check || opened.check.ok || choice.reason === 'chosen';
  recordCheck(key, manifest, choice.backend, {check: opened.check, ms: timed ?? null, warmMs: opened.warmMs}, trusted);
  if (opened.check && !opened.check.ok && choice.reason !== 'chosen') {
    // Off on this open (a remembered or the only candidate): recorded above, so not again.
    opened.model.dispose();
    rememberBackend(key, null);
    return openModel(modelId, allProbed, override, panel, options);
  }
  const warning = opened.check && !opened.check.ok
    ? `${choice.backend} gives wrong answers in this browser (error ${formatError(opened.check.error)}, ` +
      `tolerance ${opened.check.tolerance}): what it shows may be wrong. Choose another backend.`
    : null;
  panel.warn(warning);
  document.body.dataset.answerCheck = opened.check ? (opened.check.ok ? 'passed' : 'failed') : 'none';
  return {manifest, ...choice, ...opened, warning};
}

// The chosen backend: load, then one warm-up run. -> {model, loadMs, warmMs, check}; on
// failure the model is freed and the error thrown.
async function loadAndWarm(backend, load, run, panel) {
  let model;
  try {
    await useBackend(backend);
    panel.status(`Loading on ${backend}…`);
    const started = performance.now();
    model = await load(backend);
    const loadMs = performance.now() - started;
    panel.status('Warming up and checking the answers…');
    const {ms, check} = await run(model);
    panel.progress(1);
    return {model, loadMs, warmMs: ms, check};
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

export function describeChoice(opened) {
  const how = {chosen: 'as chosen', remembered: 'remembered fastest', fastest: 'fastest measured',
               'only one': 'the only fast one here'}[opened.reason] || opened.reason;
  const checks = opened.checks || {};
  const timing = ([k, v]) => {
    if (checks[k] && !checks[k].ok) return `${k} wrong answers`;
    return `${k} ${Number.isFinite(v) ? v.toFixed(0) + ' ms' : 'failed'}`;
  };
  const timed = opened.timings ? ' (' + Object.entries(opened.timings).map(timing).join(', ') + ')' : '';
  const fallback = opened.fallback ? ` ${opened.fallback}` : '';
  const check = opened.check ? `; ${describeCheck(opened.check)}` : '';
  return `${opened.manifest.title || opened.manifest.id} on ${opened.backend}, ${how}${timed}; ` +
    `warm-up ${opened.warmMs.toFixed(0)} ms${check}.${fallback}`;
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

const NO_RIGHT_BACKEND = ' No backend of this browser gave the right answers on this model, so the server runs it.';

// The page's model where the selector, the URL, the answer checks and the timings say: in the
// browser (openModel with `options`) or on the server, which also takes over when every
// browser backend answers wrong. -> {opened, why} (why: a sentence when the page did not choose the server itself)
export async function openForPage(modelId, select, probed, serverIds, panel, options) {
  panel.warn(null);
  const {override, server, why} = chooseOverride(select, modelId, probed, serverIds);
  if (server) return {opened: await openOnServer(modelId, select), why};
  try {
    const opened = await openModel(modelId, probed, override, panel, options);
    document.body.dataset.backend = opened.backend;
    return {opened, why: ''};
  } catch (err) {
    if (!(err instanceof NoRightBackend) || !serverIds.includes(modelId)) throw err;
    return {opened: await openOnServer(modelId, select), why: NO_RIGHT_BACKEND};
  }
}
