// What kind of GPU this browser offers: the WebGL renderer and the WebGPU adapter, and
// whether either is a software one (SwiftShader, llvmpipe/lavapipe, a fallback adapter).
// A software GPU gives right answers but is 10-20x slower than WASM: pages do not time it
// when WASM works, though it can still be chosen.

const SOFTWARE = /swiftshader|llvmpipe|lavapipe|software|basic render/i;

export function isSoftwareRenderer(renderer) {
  return SOFTWARE.test(renderer || '');
}

// The WebGL renderer's name, asked of an offscreen canvas's WebGL 2 context; null without one.
export function webglRenderer() {
  try {
    const gl = new OffscreenCanvas(1, 1).getContext('webgl2');
    if (!gl) return null;
    const info = gl.getExtension('WEBGL_debug_renderer_info');
    return info ? gl.getParameter(info.UNMASKED_RENDERER_WEBGL) : gl.getParameter(gl.RENDERER);
  } catch {
    return null;
  }
}

let adapterInfo = null;   // Promise of {vendor, architecture, description, software} or null

// The default WebGPU adapter's identity, asked once per page; null without WebGPU.
export function webgpuAdapterInfo() {
  if (!adapterInfo) {
    adapterInfo = (async () => {
      try {
        const adapter = navigator.gpu ? await navigator.gpu.requestAdapter() : null;
        if (!adapter) return null;
        const info = adapter.info || {};
        const {vendor = '', architecture = '', description = ''} = info;
        const software = adapter.isFallbackAdapter === true || info.isFallbackAdapter === true
          || isSoftwareRenderer(`${vendor} ${architecture} ${description}`);
        return {vendor, architecture, description, software};
      } catch {
        return null;
      }
    })();
  }
  return adapterInfo;
}

export function describeAdapter(info) {
  const name = [info.vendor, info.architecture].filter(Boolean).join(' ') || 'unnamed';
  return `adapter: ${name}${info.software ? ' (software)' : ''}`;
}
