// Runtimes: which backends work in this browser, which one to use, model loading with byte
// progress, running a model (runModel; modelRunner by role). Shared by every page. TF.js backends run the TF.js graph;
// the litert-* backends run the model's .tflite with LiteRT.js (litert.js), the onnx-* ones a
// visitor's .onnx with ONNX Runtime Web (onnx.js), while TF.js (on WASM, else CPU) still does
// the pre- and post-processing around them.
import {LITERT_BACKENDS, isLiteRtBackend, probeLiteRt} from './litert.js';
import {ONNX_BACKENDS, probeOnnx} from './onnx.js';
import {runtimeOf} from '../contract/manifest.js';
import {describeAdapter, isSoftwareRenderer, webglRenderer, webgpuAdapterInfo} from './gpu.js';

const tf = globalThis.tf;

export const BACKENDS = ['webgpu', 'webgl', 'wasm', 'cpu'];
export const ALL_BACKENDS = [...BACKENDS, ...LITERT_BACKENDS, ...ONNX_BACKENDS];
export {isLiteRtBackend, isSoftwareRenderer};
const WASM_PATH = '/vendor/tfjs-wasm/';

if (tf && tf.wasm) tf.wasm.setWasmPaths(WASM_PATH);

// Try each backend once; returns [{name, ok, note, software?}], leaving no backend
// half-initialised. `software`: a software GPU (SwiftShader WebGL or WebGPU adapter).
export async function probeBackends() {
  const results = [];
  const renderer = webglRenderer();
  const adapter = await webgpuAdapterInfo();
  for (const name of BACKENDS) {
    if (!tf.findBackendFactory(name)) {
      results.push({name, ok: false, note: 'not bundled'});
      continue;
    }
    let ok = false;
    let note = '';
    try {
      ok = await tf.setBackend(name);
      if (ok) await tf.ready();
    } catch (err) {
      ok = false;
      note = String(err && err.message || err).slice(0, 120);
    }
    let software = false;
    if (ok && name === 'webgl') {
      note = renderer ? `renderer: ${renderer}` : '';
      software = isSoftwareRenderer(renderer);
    }
    if (ok && name === 'webgpu' && adapter) {
      note = describeAdapter(adapter);
      software = adapter.software;
    }
    if (ok && name === 'wasm') {
      note = [tf.env().getBool('WASM_HAS_SIMD_SUPPORT') ? 'SIMD' : 'no SIMD',
              tf.env().getBool('WASM_HAS_MULTITHREAD_SUPPORT') ? 'threads' : 'no threads'].join(', ');
    }
    if (!ok && !note) note = 'unavailable in this browser';
    results.push({name, ok, note, ...(software ? {software} : {})});
  }
  results.push(...await probeLiteRt(), ...await probeOnnx());
  return results;
}

// (The onnx-* backends run only a visitor's .onnx: never the pages' default.)
const GPU_FIRST = ['webgpu', 'litert-webgpu', 'webgl', 'litert-wasm', 'wasm'];

// The likely pick: a hardware GPU backend if there is one, else LiteRT.js on WASM (about
// 2x TF.js WASM, measured), else TF.js WASM, else a software GPU, else CPU. Pages time the
// candidates anyway.
export function defaultBackend(probed) {
  const works = (n, software) => probed.some((p) => p.name === n && p.ok && !p.software === !software);
  return GPU_FIRST.find((n) => works(n, false)) || GPU_FIRST.find((n) => works(n, true))
    || (works('cpu', false) ? 'cpu' : null);
}

// The TF.js backend that does the tensor work around a LiteRT or ONNX model.
async function helperBackend() {
  for (const name of ['wasm', 'cpu']) {
    try {
      if (tf.findBackendFactory(name) && await tf.setBackend(name)) return name;
    } catch { /* try the next */ }
  }
  throw new Error('no TF.js backend for pre- and post-processing');
}

// Told the backend's name on every useBackend (the page's badge: ui/page.js showBackend).
const backendListeners = [];
export function onBackendChange(listener) {
  backendListeners.push(listener);
}

export async function useBackend(name) {
  if (runtimeOf(name) !== 'tfjs') {
    await helperBackend();
  } else {
    const ok = await tf.setBackend(name);
    if (!ok) throw new Error(`backend ${name} failed to initialise`);
  }
  await tf.ready();
  for (const listener of backendListeners) listener(name);
  return name;
}

// loadGraphModel with a byte-level progress callback (fraction 0..1).
// source: a model.json URL, or a TF.js IOHandler (tf.io.browserFiles of a folder's files).
export async function loadModel(source, onProgress) {
  return tf.loadGraphModel(source, {onProgress: (fraction) => onProgress && onProgress(fraction)});
}

// Graph models with dynamic ops (NMS, control flow) need executeAsync; the others run
// faster and quieter with execute. Learned once per model on its first call.
export async function runModel(model, feed, outputs) {
  return perturbed(model, await execute(model, feed, outputs));
}

async function execute(model, feed, outputs) {
  if (model.runtime) return model.predict(feed, outputs);   // LiteRT.js, ONNX Runtime Web
  if (!model.needsAsync) {
    try {
      return model.execute(feed, outputs);
    } catch (err) {
      if (!/executeAsync|dynamic/i.test(String(err && err.message))) throw err;
      model.needsAsync = true;
    }
  }
  return model.executeAsync(feed, outputs);
}

// Test hook: globalThis.DATARAILROAD_PERTURB = {backend, add} makes that backend answer
// wrong (`add` on every float output), as a faulty GPU driver would; the answer check must
// then keep the page off it. Unset in normal use.
function perturbed(model, result) {
  const fault = globalThis.DATARAILROAD_PERTURB;
  const backend = model.runtime ? `${model.runtime}-${model.accelerator}` : tf.getBackend();
  if (!fault || fault.backend !== backend) return result;
  const shift = (t) => {
    if (t.dtype !== 'float32') return t;
    const moved = tf.add(t, fault.add);
    t.dispose();
    return moved;
  };
  return Array.isArray(result) ? result.map(shift) : shift(result);
}

// One model, whatever runs it (a TF.js graph, or a LiteRtGraph from litert.js), by role:
// names {role: output name}; run(input tensor) -> {role: Float32Array}; every tensor it makes
// is disposed here (tensor/hands.js HandPipeline runs two of them).
export function modelRunner(model, names) {
  const roles = Object.keys(names);
  return {
    model,
    async run(input) {
      let outputs = await runModel(model, input, roles.map((r) => names[r]));
      outputs = Array.isArray(outputs) ? outputs : [outputs];
      try {
        const data = await Promise.all(outputs.map((t) => t.data()));
        return Object.fromEntries(roles.map((role, i) => [role, data[i]]));
      } finally {
        tf.dispose(outputs);
      }
    },
    dispose() {
      model.dispose();
    },
  };
}

// ---- Backend choice: the fastest measured for a model, remembered per model ----

const STORAGE_PREFIX = 'datarailroad.backend.';

export function rememberedBackend(modelId) {
  try {
    return localStorage.getItem(STORAGE_PREFIX + modelId);
  } catch {
    return null;
  }
}

export function rememberBackend(modelId, backend) {
  try {
    if (backend) localStorage.setItem(STORAGE_PREFIX + modelId, backend);
    else localStorage.removeItem(STORAGE_PREFIX + modelId);
  } catch { /* private mode: choose again next time */ }
}

// A backend fast enough for live video: WebGPU or WebGL on a hardware GPU, WASM, or LiteRT.js.
export function hasFastBackend(probed) {
  return probed.some((p) => p.ok && !p.software && p.name !== 'cpu');
}

// Candidates worth timing: every working backend but CPU (always slowest), and no software
// GPU when another works (10-20x slower than WASM: minutes of warm-up for nothing).
export function timingCandidates(probed, excluded = []) {
  const works = probed.filter((p) => p.ok && !excluded.includes(p.name));
  let candidates = works.filter((p) => p.name !== 'cpu');
  if (candidates.some((p) => !p.software)) candidates = candidates.filter((p) => !p.software);
  return (candidates.length ? candidates : works).map((p) => p.name);
}

// override (URL ?backend= or the selector) > remembered > fastest measured among those that
// answer right. `excluded`: backends known to answer wrong for this build (not timed).
// timeOne(backend) loads the model there and returns {ms, check} of its warm runs (check:
// contract/answers.js judge, null without a record); a backend whose check fails is not chosen.
// -> {backend, reason, timings?, checks?}; throws when no backend answers right.
export async function chooseBackend(modelId, probed, timeOne, override, excluded = []) {
  const works = (n) => probed.some((p) => p.name === n && p.ok);
  if (override && works(override)) return {backend: override, reason: 'chosen'};
  const remembered = rememberedBackend(modelId);
  if (remembered && works(remembered) && !excluded.includes(remembered)) return {backend: remembered, reason: 'remembered'};
  const candidates = timingCandidates(probed, excluded);
  if (!candidates.length) throw new NoRightBackend(excluded);
  if (candidates.length === 1) return {backend: candidates[0], reason: 'only one'};
  const timings = {};
  const checks = {};
  for (const name of candidates) {
    try {
      await useBackend(name);
      const timed = await timeOne(name);
      checks[name] = timed.check;
      timings[name] = timed.check && !timed.check.ok ? Infinity : timed.ms;
    } catch {
      timings[name] = Infinity;
    }
  }
  const best = Object.keys(timings).reduce((a, b) => (timings[a] <= timings[b] ? a : b));
  if (!Number.isFinite(timings[best])) {
    if (Object.values(checks).some((c) => c && !c.ok)) throw new NoRightBackend([...excluded, ...Object.keys(checks)]);
    throw new Error('no backend of this browser could run the model');
  }
  rememberBackend(modelId, best);
  return {backend: best, reason: 'fastest', timings, checks};
}

// Every backend of this browser that could run the model answered wrong (or was recorded so).
export class NoRightBackend extends Error {
  constructor(wrong) {
    super(`no backend of this browser gave the right answers (wrong: ${wrong.join(', ')})`);
    this.wrong = wrong;
  }
}

export function urlOverride(name) {
  return new URLSearchParams(location.search).get(name);
}
