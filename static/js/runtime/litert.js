// LiteRT.js (@litertjs/core): the same .tflite the server runs, on XNNPACK compiled to
// WASM (or WebGPU). Pre- and post-processing stay in TF.js (same code as every other
// backend); only the model runs here. LiteRT tensors live in the WASM heap and are freed
// by hand: every one this module makes is deleted in a finally, and counted, so tests can
// hold the count (and the heap size) flat.
import {describeAdapter, webgpuAdapterInfo} from './gpu.js';

const CORE_URL = '/vendor/litertjs/core/index.js';
const WASM_DIR = '/vendor/litertjs/wasm/';
export const LITERT_BACKENDS = ['litert-wasm', 'litert-webgpu'];

let lib = null;          // the @litertjs/core module, once imported
const live = {tensors: 0, models: 0};

// LiteRT's own log: INFO/WARNING lines are chatter here (no NPU, GPU registered...).
function logLine(text) {
  if (/^\s*(E\d|ERROR|F\d|FATAL)/.test(text)) console.warn(`LiteRT: ${text}`);
  else console.debug(`LiteRT: ${text}`);
}

export function isLiteRtBackend(name) {
  return LITERT_BACKENDS.includes(name);
}

// Which WASM build can run here: threads need relaxed SIMD, SharedArrayBuffer and a
// cross-origin isolated page; without them LiteRT picks its single-threaded build. JSPI
// (WebAssembly promise integration) is what WebGPU needs for a graph with CPU-only ops:
// yolov5n's in-graph NMS fails on the other builds ("Asyncify is not defined", LiteRT #7314).
async function wasmFeatures(core) {
  const [relaxedSimd, threadsSupported, jspi] = await Promise.all(
    [core.supportsFeature('relaxedSimd'), core.supportsFeature('threads'), core.supportsFeature('jspi')]);
  const threads = relaxedSimd && threadsSupported && globalThis.crossOriginIsolated === true
    && typeof SharedArrayBuffer === 'function';
  return {relaxedSimd, threads, jspi};
}

// The build for an accelerator: JSPI for WebGPU where the browser has it, else the fastest
// WASM build (threads and JSPI are exclusive in LiteRT.js).
function buildFor(accelerator, features) {
  return accelerator === 'webgpu' && features.jspi ? 'jspi' : 'wasm';
}

// Imports the library and loads one of its WASM builds (`accelerator` picks it; default
// 'wasm'). One build is loaded at a time: asking for the other unloads this one, which
// invalidates its models (pages free theirs before they open another). Calls run one after
// another (a model's parts load at once). Never throws: a page without LiteRT keeps its
// TF.js backends. -> {ok, build, threads, relaxedSimd, jspi, note}
export function loadRuntime(accelerator = 'wasm') {
  const next = queue.then(() => switchRuntime(accelerator));
  queue = next;
  return next;
}

let queue = Promise.resolve();
let runtime = null;      // what the last load gave

async function switchRuntime(accelerator) {
  if (runtime && (!runtime.ok || runtime.build === buildFor(accelerator, runtime))) return runtime;
  if (runtime) lib.unloadLiteRt();
  try {
    if (typeof WebAssembly !== 'object') return (runtime = {ok: false, note: 'no WebAssembly in this browser'});
    const core = await import(CORE_URL);
    const features = await wasmFeatures(core);
    const build = buildFor(accelerator, features);
    // Emscripten's Module object (read by the loader) takes the runtime's log lines,
    // which would otherwise all land in console.error, INFO lines included.
    globalThis.Module = {print: logLine, printErr: logLine};
    try {
      await core.loadLiteRt(WASM_DIR, build === 'jspi' ? {jspi: true} : {threads: features.threads});
    } finally {
      delete globalThis.Module;
    }
    lib = core;
    const note = [features.threads ? 'threads' : 'no threads (single-threaded build)',
                  features.relaxedSimd ? 'relaxed SIMD' : 'no relaxed SIMD (compat build)'].join(', ');
    runtime = {ok: true, build, ...features, note};
  } catch (err) {
    runtime = {ok: false, note: `LiteRT.js did not load: ${String(err && err.message || err).slice(0, 120)}`};
  }
  return runtime;
}

// -> [{name: 'litert-wasm', ok, note}, {name: 'litert-webgpu', ok, note, software?}]
export async function probeLiteRt() {
  const runtime = await loadRuntime();
  const results = [{name: 'litert-wasm', ok: runtime.ok, note: runtime.note}];
  const adapter = runtime.ok && lib.isWebGPUSupported() ? await webgpuAdapterInfo() : null;
  if (!runtime.ok) {
    results.push({name: 'litert-webgpu', ok: false, note: runtime.note});
  } else if (!adapter) {
    results.push({name: 'litert-webgpu', ok: false, note: 'no WebGPU adapter in this browser'});
  } else {
    const build = runtime.jspi ? 'JSPI build' : 'no JSPI: graphs with CPU-only ops (NMS) fail';
    results.push({name: 'litert-webgpu', ok: true, note: `WebGPU, ${describeAdapter(adapter)}, ${build}`,
                  ...(adapter.software ? {software: true} : {})});
  }
  return results;
}

// Live LiteRT objects made by this page, and the WASM heap they sit in (it only grows:
// a leak shows as growth).
export function liteRtStats() {
  let heapBytes = null;
  try {
    heapBytes = lib ? lib.getGlobalLiteRt().liteRtWasm.HEAPU8.byteLength : null;
  } catch { /* not loaded */ }
  return {tensors: live.tensors, models: live.models, heapBytes};
}

// fetch with byte progress (fraction 0..1); `expected` (bytes, from the manifest) when the
// server sends no Content-Length.
export async function fetchBytes(url, onProgress, expected = 0) {
  const response = await fetch(url);
  if (!response.ok) throw new Error(`${url}: HTTP ${response.status}`);
  const total = Number(response.headers.get('Content-Length')) || expected;
  if (!response.body || !total) return new Uint8Array(await response.arrayBuffer());
  const reader = response.body.getReader();
  const chunks = [];
  let received = 0;
  for (;;) {
    const {done, value} = await reader.read();
    if (done) break;
    chunks.push(value);
    received += value.byteLength;
    if (onProgress) onProgress(Math.min(received / total, 1));
  }
  const bytes = new Uint8Array(received);
  let offset = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return bytes;
}

function deleteAll(tensors) {
  for (const t of tensors) {
    if (t && !t.deleted) {
      t.delete();
      live.tensors -= 1;
    }
  }
}

// A compiled .tflite that looks like a TF.js graph model to the pages: `inputs` for the
// warm-up, predict(feed, outputNames) -> tf.Tensors in the order asked, dispose().
// `outputNames` are TF.js output names or .tflite signature keys (keyOf maps the first to the
// second, from the manifest); without them the signature's order is used.
export class LiteRtGraph {
  constructor(compiled, accelerator, keyOf = {}) {
    this.compiled = compiled;
    this.accelerator = accelerator;
    this.keyOf = keyOf;
    this.runtime = 'litert';
    live.models += 1;
    this.inputs = compiled.getInputDetails().map((d) => ({name: d.name, shape: Array.from(d.shape), dtype: d.dtype}));
    this.outputKeys = compiled.getOutputDetails().map((d) => d.name);
  }

  // feed: one tf.Tensor, an array in input order, or {inputName: tf.Tensor}.
  async predict(feed, outputNames) {
    const tf = globalThis.tf;
    const given = feed instanceof tf.Tensor ? [feed] : Array.isArray(feed) ? feed : this.inputs.map((i) => feed[i.name]);
    const made = [];
    try {
      const named = {};
      for (let i = 0; i < this.inputs.length; i++) {
        const x = given[i];
        const data = await x.data();
        const typed = {int32: Int32Array, uint8: Uint8Array}[this.inputs[i].dtype];
        const tensor = new lib.Tensor(typed ? typed.from(data) : data, x.shape);
        live.tensors += 1;
        made.push(tensor);
        named[this.inputs[i].name] = tensor;
      }
      const result = await this.compiled.run(named);
      const outputs = Object.values(result);
      live.tensors += outputs.length;
      made.push(...outputs);
      // A one-output model needs no names: there is nothing to mix up.
      const byName = outputNames && outputNames.length && this.outputKeys.length > 1;
      const keys = byName ? outputNames.map((n) => this.keyOf[n] || n) : this.outputKeys;
      return await Promise.all(keys.map(async (key) => {
        const out = result[key];
        if (!out) throw new Error(`the .tflite has no output ${key} (it has ${Object.keys(result).join(', ')})`);
        const host = out.accelerator === 'wasm' ? out : await out.copyTo('wasm');
        if (host !== out) {
          live.tensors += 1;
          made.push(host);
        }
        // toTypedArray copies out of the WASM heap, so the LiteRT tensor can go at once.
        return tf.tensor(host.toTypedArray(), Array.from(host.type.layout.dimensions));
      }));
    } finally {
      deleteAll(made);
    }
  }

  dispose() {
    if (this.compiled.deleted) return;
    try {
      this.compiled.delete();
    } catch { /* its runtime build was unloaded (loadRuntime): nothing left to free */ }
    live.models -= 1;
  }
}

// url of the .tflite -> LiteRtGraph on 'wasm' or 'webgpu', with byte progress.
export async function loadTflite(url, accelerator, onProgress, expectedBytes = 0, keyOf = {}) {
  const runtime = await loadRuntime(accelerator);
  if (!runtime.ok) throw new Error(runtime.note);
  const bytes = await fetchBytes(url, onProgress, expectedBytes);
  const compiled = await lib.loadAndCompile(bytes, {accelerator});
  return new LiteRtGraph(compiled, accelerator, keyOf);
}
