// TF.js runtime: which backends work in this browser, which one to use, model loading
// with byte progress, and one warm-up pass. Shared by every page.
const tf = globalThis.tf;

export const BACKENDS = ['webgpu', 'webgl', 'wasm', 'cpu'];
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
  return results;
}

// The default: a hardware GPU backend if there is one, else WASM, else CPU.
export function defaultBackend(probed) {
  const works = (n) => probed.some((p) => p.name === n && p.ok);
  const softwareGl = isSoftwareRenderer(webglRenderer());
  if (works('webgpu')) return 'webgpu';
  if (works('webgl') && !softwareGl) return 'webgl';
  if (works('wasm')) return 'wasm';
  if (works('webgl')) return 'webgl';
  return works('cpu') ? 'cpu' : null;
}

export async function useBackend(name) {
  const ok = await tf.setBackend(name);
  if (!ok) throw new Error(`backend ${name} failed to initialise`);
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

// One pass on zeros compiles shaders / allocates kernels before the first real frame.
export async function warmUp(model) {
  const inputs = model.inputs.map((input) => {
    const shape = input.shape.map((d) => (d == null || d < 0 ? 1 : d));
    return tf.zeros(shape, input.dtype === 'int32' ? 'int32' : 'float32');
  });
  const started = performance.now();
  const feed = inputs.length === 1 ? inputs[0] : Object.fromEntries(model.inputs.map((inp, i) => [inp.name, inputs[i]]));
  const out = await model.executeAsync(feed);
  tf.dispose(out);
  tf.dispose(inputs);
  return performance.now() - started;
}

export function pageData() {
  const node = document.getElementById('page-data');
  return node ? JSON.parse(node.textContent || '{}') : {};
}
