// Runtimes: which backends work in this browser, which one to use, model loading with byte
// progress, and one warm-up pass. Shared by every page. TF.js backends run the TF.js graph;
// the litert-* backends run the model's .tflite with LiteRT.js (litert.js), while TF.js
// (on WASM, else CPU) still does the pre- and post-processing around it.
import {LITERT_BACKENDS, isLiteRtBackend, probeLiteRt} from './litert.js';

const tf = globalThis.tf;

export const BACKENDS = ['webgpu', 'webgl', 'wasm', 'cpu'];
export const ALL_BACKENDS = [...BACKENDS, ...LITERT_BACKENDS];
export {isLiteRtBackend};
const WASM_PATH = '/vendor/tfjs-wasm/';

if (tf && tf.wasm) tf.wasm.setWasmPaths(WASM_PATH);

// A software WebGL (SwiftShader, llvmpipe) is 10-20x slower than WASM: not a GPU.
function webglRenderer() {
  try {
    const gl = document.createElement('canvas').getContext('webgl2');
    if (!gl) return null;
    const info = gl.getExtension('WEBGL_debug_renderer_info');
    return info ? gl.getParameter(info.UNMASKED_RENDERER_WEBGL) : gl.getParameter(gl.RENDERER);
  } catch (err) {
    return null;
  }
}

export function isSoftwareRenderer(renderer) {
  return /swiftshader|llvmpipe|software|basic render/i.test(renderer || '');
}

// Try each backend once; returns [{name, ok, note}], leaving no backend half-initialised.
export async function probeBackends() {
  const results = [];
  const renderer = webglRenderer();
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
    if (ok && name === 'webgl') note = renderer ? `renderer: ${renderer}` : '';
    if (ok && name === 'wasm') {
      note = [tf.env().getBool('WASM_HAS_SIMD_SUPPORT') ? 'SIMD' : 'no SIMD',
              tf.env().getBool('WASM_HAS_MULTITHREAD_SUPPORT') ? 'threads' : 'no threads'].join(', ');
    }
    if (!ok && !note) note = 'unavailable in this browser';
    results.push({name, ok, note});
  }
  results.push(...await probeLiteRt());
  return results;
}

// The likely pick: a hardware GPU backend if there is one, else LiteRT.js on WASM (about
// 2x TF.js WASM, measured), else TF.js WASM, else CPU. Pages time the candidates anyway.
export function defaultBackend(probed) {
  const works = (n) => probed.some((p) => p.name === n && p.ok);
  const softwareGl = isSoftwareRenderer(webglRenderer());
  if (works('webgpu')) return 'webgpu';
  if (works('webgl') && !softwareGl) return 'webgl';
  if (works('litert-wasm')) return 'litert-wasm';
  if (works('wasm')) return 'wasm';
  if (works('webgl')) return 'webgl';
  return works('cpu') ? 'cpu' : null;
}

// The TF.js backend that does the tensor work around a LiteRT model.
async function helperBackend() {
  for (const name of ['wasm', 'cpu']) {
    try {
      if (tf.findBackendFactory(name) && await tf.setBackend(name)) return name;
    } catch (err) { /* try the next */ }
  }
  throw new Error('no TF.js backend for pre- and post-processing');
}

export async function useBackend(name) {
  if (isLiteRtBackend(name)) {
    await helperBackend();
  } else {
    const ok = await tf.setBackend(name);
    if (!ok) throw new Error(`backend ${name} failed to initialise`);
  }
  await tf.ready();
  showBackend(name);
  return name;
}

export function showBackend(name) {
  const badge = document.getElementById('backend-badge');
  if (!badge) return;
  badge.textContent = `backend: ${name}`;
  badge.dataset.backend = name;
}

// loadGraphModel with a byte-level progress callback (fraction 0..1).
export async function loadModel(url, onProgress) {
  return tf.loadGraphModel(url, {onProgress: (fraction) => onProgress && onProgress(fraction)});
}

// Graph models with dynamic ops (NMS, control flow) need executeAsync; the others run
// faster and quieter with execute. Learned once per model on its first call.
export async function runModel(model, feed, outputs) {
  if (model.runtime === 'litert') return model.predict(feed, outputs);
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

// One pass on zeros compiles shaders / allocates kernels before the first real frame.
export async function warmUp(model) {
  const inputs = model.inputs.map((input) => {
    const shape = input.shape.map((d) => (d == null || d < 0 ? 1 : d));
    return tf.zeros(shape, input.dtype === 'int32' ? 'int32' : 'float32');
  });
  const started = performance.now();
  const feed = inputs.length === 1 ? inputs[0] : Object.fromEntries(model.inputs.map((inp, i) => [inp.name, inputs[i]]));
  const out = await runModel(model, feed);
  // Reading one value waits for the backend to finish (WebGL/WebGPU run asynchronously).
  await (Array.isArray(out) ? out[0] : out).data();
  tf.dispose(out);
  tf.dispose(inputs);
  return performance.now() - started;
}

export function pageData() {
  const node = document.getElementById('page-data');
  return node ? JSON.parse(node.textContent || '{}') : {};
}

// ---- Backend choice: the fastest measured for a model, remembered per model ----

const STORAGE_PREFIX = 'datarailroad.backend.';

export function rememberedBackend(modelId) {
  try {
    return localStorage.getItem(STORAGE_PREFIX + modelId);
  } catch (err) {
    return null;
  }
}

export function rememberBackend(modelId, backend) {
  try {
    if (backend) localStorage.setItem(STORAGE_PREFIX + modelId, backend);
    else localStorage.removeItem(STORAGE_PREFIX + modelId);
  } catch (err) { /* private mode: choose again next time */ }
}

// A backend fast enough for live video: WebGPU, hardware WebGL, WASM, or LiteRT.js.
export function hasFastBackend(probed) {
  return probed.some((p) => p.ok && (p.name === 'webgpu' || p.name === 'wasm' || isLiteRtBackend(p.name)
                                     || (p.name === 'webgl' && !isSoftwareRenderer(webglRenderer()))));
}

// Candidates worth timing: every working backend but CPU (always slowest), and not a
// software WebGL when WASM works (10-20x slower: minutes of warm-up for nothing).
export function timingCandidates(probed) {
  const works = probed.filter((p) => p.ok).map((p) => p.name);
  let candidates = works.filter((n) => n !== 'cpu');
  if (candidates.includes('wasm') && isSoftwareRenderer(webglRenderer())) {
    candidates = candidates.filter((n) => n !== 'webgl');
  }
  return candidates.length ? candidates : works;
}

// override (URL ?backend= or the selector) > remembered > fastest measured.
// timeOne(backend) loads the model there and returns the ms of one warm run.
export async function chooseBackend(modelId, probed, timeOne, override) {
  const works = (n) => probed.some((p) => p.name === n && p.ok);
  if (override && works(override)) return {backend: override, reason: 'chosen'};
  const remembered = rememberedBackend(modelId);
  if (remembered && works(remembered)) return {backend: remembered, reason: 'remembered'};
  const candidates = timingCandidates(probed);
  if (candidates.length === 1) return {backend: candidates[0], reason: 'only one'};
  const timings = {};
  for (const name of candidates) {
    try {
      await useBackend(name);
      timings[name] = await timeOne(name);
    } catch (err) {
      timings[name] = Infinity;
    }
  }
  const best = Object.keys(timings).reduce((a, b) => (timings[a] <= timings[b] ? a : b));
  if (!Number.isFinite(timings[best])) throw new Error('no backend of this browser could run the model');
  rememberBackend(modelId, best);
  return {backend: best, reason: 'fastest', timings};
}

export function urlOverride(name) {
  return new URLSearchParams(location.search).get(name);
}

// ---- A loaded model: manifest + graph on the current backend ----

export async function fetchManifest(modelId) {
  let response;
  try {
    response = await fetch(`/models/${encodeURIComponent(modelId)}/manifest.json`);
  } catch (err) {
    // Offline, the service worker answers only for models used before (templates/sw.js).
    if (navigator.onLine === false) {
      throw new Error(`${modelId} is not in this browser's offline copy: open this page once while online`);
    }
    throw err;
  }
  if (!response.ok) throw new Error(`manifest of ${modelId}: HTTP ${response.status}`);
  return response.json();
}

export function graphUrl(manifest, part = 'model') {
  const path = manifest.tfjs[part] || Object.values(manifest.tfjs)[0];
  return `/models/${encodeURIComponent(manifest.id)}/${path}`;
}

// The .tflite of a model part for LiteRT.js: {url, bytes}, or null for a model built
// before manifests listed it (LiteRT is then not offered for it).
export function tfliteArtifact(manifest, part = 'model') {
  const artifact = (manifest.litert || {})[part];
  return artifact ? {url: `/models/${encodeURIComponent(manifest.id)}/${artifact.path}`, bytes: artifact.bytes || 0}
    : null;
}

// Median ms of `runs` executions of a warm model on zeros (used to compare backends).
export async function timeModel(model, runs = 2) {
  await warmUp(model);
  const times = [];
  for (let i = 0; i < runs; i++) times.push(await warmUp(model));
  times.sort((a, b) => a - b);
  return times[Math.floor(times.length / 2)];
}
