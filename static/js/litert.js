// LiteRT.js (@litertjs/core): the same .tflite the server runs, on XNNPACK compiled to
// WASM (or WebGPU). Pre- and post-processing stay in TF.js (same code as every other
// backend); only the model runs here. LiteRT tensors live in the WASM heap and are freed
// by hand: every one this module makes is deleted in a finally, and counted, so tests can
// hold the count (and the heap size) flat.
const CORE_URL = '/vendor/litertjs/core/index.js';
const WASM_DIR = '/vendor/litertjs/wasm/';
export const LITERT_BACKENDS = ['litert-wasm', 'litert-webgpu'];

let lib = null;          // the @litertjs/core module, once imported
let loading = null;      // Promise of {ok, threads, relaxedSimd, note}
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
// cross-origin isolated page; without them LiteRT picks its single-threaded build.
async function wasmFeatures(core) {
  const [relaxedSimd, threadsSupported] = await Promise.all(
    [core.supportsFeature('relaxedSimd'), core.supportsFeature('threads')]);
  const threads = relaxedSimd && threadsSupported && globalThis.crossOriginIsolated === true
    && typeof SharedArrayBuffer === 'function';
  return {relaxedSimd, threads};
}

// Imports the library and loads its WASM once per page. Never throws: a page without
// LiteRT keeps its TF.js backends. -> {ok, threads, relaxedSimd, note}
export function loadRuntime() {
  if (!loading) {
    loading = (async () => {
      try {
        if (typeof WebAssembly !== 'object') return {ok: false, note: 'no WebAssembly in this browser'};
        const core = await import(CORE_URL);
        const features = await wasmFeatures(core);
        // Emscripten's Module object (read by the loader) takes the runtime's log lines,
        // which would otherwise all land in console.error, INFO lines included.
        globalThis.Module = {print: logLine, printErr: logLine};
        try {
          await core.loadLiteRt(WASM_DIR, {threads: features.threads});
        } finally {
          delete globalThis.Module;
        }
        lib = core;
        const note = [features.threads ? 'threads' : 'no threads (single-threaded build)',
                      features.relaxedSimd ? 'relaxed SIMD' : 'no relaxed SIMD (compat build)'].join(', ');
        return {ok: true, ...features, note};
      } catch (err) {
        return {ok: false, note: `LiteRT.js did not load: ${String(err && err.message || err).slice(0, 120)}`};
      }
    })();
  }
  return loading;
}

async function webgpuAdapter() {
  try {
    return navigator.gpu ? await navigator.gpu.requestAdapter() : null;
  } catch (err) {
    return null;
  }
}

// -> [{name: 'litert-wasm', ok, note}, {name: 'litert-webgpu', ok, note}]
export async function probeLiteRt() {
  const runtime = await loadRuntime();
  const results = [{name: 'litert-wasm', ok: runtime.ok, note: runtime.note}];
  if (!runtime.ok) {
    results.push({name: 'litert-webgpu', ok: false, note: runtime.note});
  } else if (!lib.isWebGPUSupported() || !(await webgpuAdapter())) {
    results.push({name: 'litert-webgpu', ok: false, note: 'no WebGPU adapter in this browser'});
  } else {
    results.push({name: 'litert-webgpu', ok: true, note: 'WebGPU'});
  }
  return results;
}

// Live LiteRT objects made by this page, and the WASM heap they sit in (it only grows:
// a leak shows as growth).
export function liteRtStats() {
  let heapBytes = null;
  try {
    heapBytes = lib ? lib.getGlobalLiteRt().liteRtWasm.HEAPU8.byteLength : null;
  } catch (err) { /* not loaded */ }
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
        const tensor = new lib.Tensor(this.inputs[i].dtype === 'int32' ? Int32Array.from(data) : data, x.shape);
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
    if (!this.compiled.deleted) {
      this.compiled.delete();
      live.models -= 1;
    }
  }
}

// url of the .tflite -> LiteRtGraph on 'wasm' or 'webgpu', with byte progress.
export async function loadTflite(url, accelerator, onProgress, expectedBytes = 0, keyOf = {}) {
  const runtime = await loadRuntime();
  if (!runtime.ok) throw new Error(runtime.note);
  const bytes = await fetchBytes(url, onProgress, expectedBytes);
  const compiled = await lib.loadAndCompile(bytes, {accelerator});
  return new LiteRtGraph(compiled, accelerator, keyOf);
}
