// Opening one model in the browser: manifest, backend choice (answer-checked and timed, or
// remembered), graph load with byte progress, warm-up on the answer check's pattern, and
// the fall-backs when a backend fails or answers wrong. The page's session (session.js)
// calls it; `panel` is its status panel.
import {chooseBackend, loadModel, rememberBackend, runModel, useBackend} from './runtime.js';
import {fileArtifact, graphUrl, hasArtifactFor, needsAsync, outputKeys, partBytes, runtimeOf} from '../contract/manifest.js';
import {fetchManifest} from './manifests.js';
import {fetchBytes, loadTflite} from './litert.js';
import {loadOnnx} from './onnx.js';
import {UltralyticsGraph} from '../tensor/ultralytics-graph.js';
import {formatError, graphRoles, judge, sampleIndices} from '../contract/answers.js';
import {modelInput} from '../tensor/answers.js';
import {recordCheck, wrongBackends} from './answer-records.js';

const tf = globalThis.tf;

// The model's graph for a backend: the TF.js graph, the .tflite on LiteRT.js, or the .onnx
// on ONNX Runtime Web (a file the visitor gave).
async function loadFor(backend, manifest, part, onProgress) {
  const runtime = runtimeOf(backend);
  if (runtime !== 'tfjs') {
    const artifact = fileArtifact(manifest, runtime, part);
    if (!artifact) throw new Error(`${manifest.id}'s manifest lists no file for ${backend} (rebuild the model)`);
    const accelerator = backend.replace(`${runtime}-`, '');
    const graph = runtime === 'onnx'
      ? await loadOnnx(await fetchBytes(artifact.url, onProgress, artifact.bytes), accelerator, manifest.file_io.input)
      : await loadTflite(artifact.url, accelerator, onProgress, artifact.bytes, outputKeys(manifest));
    if (!String(manifest.graph).startsWith('ultralytics-')) return graph;
    try {
      return new UltralyticsGraph(graph, manifest);
    } catch (err) {
      graph.dispose();
      throw err;
    }
  }
  // A TF.js folder the visitor gave is read from its files; an installed model from the server.
  const graph = manifest.tfjsFiles ? tf.io.browserFiles(manifest.tfjsFiles.filter((f) => !f.name.startsWith('metadata.')))
    : graphUrl(manifest, part);
  const model = await loadModel(graph, onProgress);
  // The converter knows whether the graph has dynamic ops (in-graph NMS): no trial run.
  if (needsAsync(manifest)) model.needsAsync = true;
  return model;
}

// A LiteRT backend that failed here is dropped from this page's choices (with its reason).
function markFailed(probed, backend, err) {
  const entry = probed.find((p) => p.name === backend);
  if (entry) Object.assign(entry, {ok: false, note: `failed: ${String(err && err.message || err).slice(0, 120)}`});
}

// A one-graph model's answer on the check pattern: {model: {role: TypedArray}} (contract/answers.js).
// A build without a record (or without named outputs) still runs once, as a warm-up: null.
async function graphAnswer(model, manifest) {
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
  const sizes = parts.map((part) => partBytes(manifest, part, backend));
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
// check's pattern whose answer is judged against the manifest's record (contract/answers.js).
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
  const probed = parts ? allProbed : allProbed.filter((p) => runtimeOf(p.name) === 'tfjs');
  panel.status('Reading the model manifest…', 'loading');
  panel.warn(null);
  const manifest = await fetchManifest(modelId);
  // Only the backends with something to run: a model the visitor gave is one .tflite or .onnx.
  const offered = probed.filter((p) => hasArtifactFor(manifest, p.name));
  const load = (backend) => loadParts(backend, manifest, parts, create, panel);
  if (manifest.answer_reference && !manifest.answer_check) {
    manifest.answer_check = await referenceAnswer(manifest, offered, load, answer, panel);
  }
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
  const choice = await chooseBackend(key, offered, timeOne, override, wrongBackends(key, manifest));
  for (const [name, check] of Object.entries(choice.checks || {})) {
    recordCheck(key, manifest, name, {check, ms: Number.isFinite(choice.timings[name]) ? choice.timings[name] : null});
  }
  let opened;
  try {
    opened = await loadAndWarm(choice.backend, load, run, panel);
  } catch (err) {
    if (runtimeOf(choice.backend) !== 'tfjs') {
      return fallBack(offered, choice, key, err, () => openModel(modelId, allProbed, null, panel, options));
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
  return {manifest, ...choice, ...opened, warning};
}

// A model with no source framework's record (one the visitor gave): its answer on the check
// pattern on the reference backend (manifest.answer_reference, LiteRT.js on WASM), recorded as
// the converter records PyTorch's, so every other backend is held to it. -> answer_check
async function referenceAnswer(manifest, offered, load, answer, panel) {
  const backend = manifest.answer_reference;
  if (!answer || !offered.some((p) => p.name === backend && p.ok)) {
    throw new Error(`this model is checked against ${backend}, which this browser cannot run`);
  }
  panel.status(`Recording ${backend}'s answer on the check pattern…`);
  await useBackend(backend);
  const model = await load(backend);
  let answered;
  try {
    answered = await answer(model, {...manifest, answer_check: {}});
  } finally {
    model.dispose();
  }
  const record = (values) => ({size: values.length, values: sampleIndices(values.length).map((i) => values[i])});
  const parts = Object.fromEntries(Object.entries(answered).map(
    ([part, roles]) => [part, Object.fromEntries(Object.entries(roles).map(([role, v]) => [role, record(v)]))]));
  return {tolerance: manifest.tolerance, reference: backend, parts};
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

// LiteRT.js or ONNX Runtime Web could not run the model here: drop that backend from this
// page's choices and reopen on the others, saying why.
async function fallBack(probed, choice, memoryKey, err, reopen) {
  markFailed(probed, choice.backend, err);
  if (choice.reason === 'remembered' || choice.reason === 'fastest') rememberBackend(memoryKey, null);
  const opened = await reopen();
  return {...opened, fallback: `${choice.backend} failed (${err.message}), so ${opened.backend} runs it.`};
}
