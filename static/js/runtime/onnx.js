// ONNX Runtime Web (onnxruntime-web from npm, served under /vendor/ort/): an .onnx the visitor
// gives runs on its WASM backend, or on WebGPU. The library loads only when an .onnx opens;
// pre- and post-processing stay in TF.js, as around LiteRT.js (litert.js). An OnnxGraph looks
// like a TF.js graph model to the pages: `inputs`, predict(feed) -> tf.Tensors, dispose().
import {describeAdapter, webgpuAdapterInfo} from './gpu.js';

const ORT_URL = '/vendor/ort/ort.min.mjs';
const WASM_DIR = '/vendor/ort/';
export const ONNX_BACKENDS = ['onnx-wasm', 'onnx-webgpu'];

export function isOnnxBackend(name) {
  return ONNX_BACKENDS.includes(name);
}

let ort = null;

async function runtime() {
  if (ort) return ort;
  const lib = await import(ORT_URL);
  lib.env.wasm.wasmPaths = WASM_DIR;
  // Threads need a cross-origin isolated page (the app's pages are): as many as cores, up to four.
  lib.env.wasm.numThreads = globalThis.crossOriginIsolated ? Math.min(4, navigator.hardwareConcurrency || 1) : 1;
  lib.env.logLevel = 'error';
  ort = lib;
  return ort;
}

// -> [{name: 'onnx-wasm', ok, note}, {name: 'onnx-webgpu', ok, note, software?}], without
// loading the library (30 MB of WASM): only a dropped .onnx needs it.
export async function probeOnnx() {
  const wasm = typeof WebAssembly === 'object';
  const adapter = await webgpuAdapterInfo();
  return [
    {name: 'onnx-wasm', ok: wasm, note: wasm ? 'ONNX Runtime Web, loaded when an .onnx opens' : 'no WebAssembly in this browser'},
    {name: 'onnx-webgpu', ok: Boolean(adapter), note: adapter ? `WebGPU, ${describeAdapter(adapter)}` : 'no WebGPU adapter in this browser',
     ...(adapter && adapter.software ? {software: true} : {})},
  ];
}

// IEEE half floats (a float16 model's input and outputs) to and from float32.
const scratch = new DataView(new ArrayBuffer(4));

export function toHalf(value) {
  scratch.setFloat32(0, value);
  const bits = scratch.getUint32(0);
  const sign = (bits >>> 16) & 0x8000;
  const exponent = ((bits >>> 23) & 0xff) - 127 + 15;
  const mantissa = bits & 0x7fffff;
  if (exponent >= 31) return sign | 0x7c00 | (((bits >>> 23) & 0xff) === 0xff && mantissa ? 0x200 : 0);
  if (exponent < -10) return sign;
  // Round to nearest, ties to even (a carry moves into the exponent, up to infinity).
  const full = exponent > 0 ? mantissa : mantissa | 0x800000;
  const shift = exponent > 0 ? 13 : 14 - exponent;
  let kept = full >>> shift;
  const rest = full & ((1 << shift) - 1);
  const half = 1 << (shift - 1);
  if (rest > half || (rest === half && (kept & 1))) kept += 1;
  return sign | ((exponent > 0 ? exponent << 10 : 0) + kept);
}

export function fromHalf(half) {
  const exponent = (half >> 10) & 0x1f;
  const mantissa = half & 0x3ff;
  const sign = half & 0x8000 ? -1 : 1;
  if (exponent === 0) return sign * mantissa * 2 ** -24;
  if (exponent === 31) return mantissa ? NaN : sign * Infinity;
  return sign * (1 + mantissa / 1024) * 2 ** (exponent - 15);
}

export class OnnxGraph {
  // session: an ort.InferenceSession; input: {name, shape, dtype} the file says (shape with
  // its named dimensions set from the metadata's image size); lib: the ort module.
  constructor(session, accelerator, input, lib) {
    this.session = session;
    this.lib = lib;
    this.accelerator = accelerator;
    this.runtime = 'onnx';
    this.inputs = [input];
  }

  // feed: one tf.Tensor (or [it], {name: it}) -> the outputs in the file's order, as tf.Tensors.
  async predict(feed) {
    const tf = globalThis.tf;
    const x = feed instanceof tf.Tensor ? feed : Array.isArray(feed) ? feed[0] : Object.values(feed)[0];
    const {name, dtype} = this.inputs[0];
    const values = await x.data();
    const data = dtype === 'float16' ? Uint16Array.from(values, toHalf) : values;
    const input = new this.lib.Tensor(dtype, data, x.shape);
    let results;
    try {
      results = await this.session.run({[name]: input});
      return this.session.outputNames.map((key) => {
        const out = results[key];
        // float16 comes back as a Float16Array where the browser has one (decoded already),
        // else as the raw bits in a Uint16Array.
        const floats = out.type !== 'float16' ? out.data
          : out.data instanceof Uint16Array ? Float32Array.from(out.data, fromHalf) : Float32Array.from(out.data);
        return tf.tensor(floats instanceof BigInt64Array ? Int32Array.from(floats, Number) : floats, out.dims);
      });
    } finally {
      input.dispose();
      for (const out of Object.values(results || {})) out.dispose();
    }
  }

  dispose() {
    if (this.released) return;
    this.released = true;
    this.session.release().catch(() => { /* already gone */ });
  }
}

// The bytes of an .onnx -> OnnxGraph on 'wasm' or 'webgpu'.
export async function loadOnnx(bytes, accelerator, input) {
  const lib = await runtime();
  const session = await lib.InferenceSession.create(bytes, {executionProviders: [accelerator], graphOptimizationLevel: 'all'});
  return new OnnxGraph(session, accelerator, input, lib);
}
