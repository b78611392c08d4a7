// An installed model's manifest.json, read one way by every page (the server's reader is
// modelcontract/manifest.py; the schema is modelcontract/manifest.schema.json): where its
// files are, their sizes, and what its outputs are called. runtime/manifests.js fetches it.

function fileUrl(manifest, path) {
  return `/models/${encodeURIComponent(manifest.id)}/${path}`;
}

// What runs a model on a backend: LiteRT.js its .tflite (litert-*), ONNX Runtime Web its
// .onnx (onnx-*: only a file the visitor gives has one), TF.js its graph (the others).
export function runtimeOf(backend) {
  return String(backend).startsWith('litert-') ? 'litert' : String(backend).startsWith('onnx-') ? 'onnx' : 'tfjs';
}

// Whether a backend has something to run: a TF.js graph, a .tflite, or an .onnx.
export function hasArtifactFor(manifest, backend) {
  return Boolean(manifest[runtimeOf(backend)]);
}

// The TF.js graph of a model part (its model.json).
export function graphUrl(manifest, part = 'model') {
  return fileUrl(manifest, manifest.tfjs[part] || Object.values(manifest.tfjs)[0]);
}

// The file of a model part for LiteRT.js (runtime 'litert': its .tflite) or ONNX Runtime Web
// ('onnx'): {url, bytes}, or null for a model built before manifests listed it (LiteRT is
// then not offered for it). A model the visitor gave has its own url (blob:).
export function fileArtifact(manifest, runtime, part = 'model') {
  const artifact = (manifest[runtime] || {})[part];
  if (!artifact) return null;
  return {url: artifact.url || fileUrl(manifest, artifact.path), bytes: artifact.bytes || 0};
}

export function tfliteArtifact(manifest, part = 'model') {
  return fileArtifact(manifest, 'litert', part);
}

// Bytes a browser downloads for a part on a backend (TF.js: graph + shards; LiteRT.js or
// ONNX Runtime Web: the file): the weights of a progress bar; 1 when the manifest doesn't say.
export function partBytes(manifest, part, backend) {
  const runtime = runtimeOf(backend);
  const bytes = runtime === 'tfjs' ? (manifest.tfjs_bytes || {})[part] : (fileArtifact(manifest, runtime, part) || {}).bytes;
  return bytes || 1;
}

// The graph has dynamic ops (in-graph NMS): it runs with executeAsync. The converter knows.
export function needsAsync(manifest) {
  return (manifest.outputs || {}).execute === 'executeAsync';
}

// The outputs in the manifest's order: [{name, key?, model?, ...}] (name: the TF.js tensor;
// key: the role, which is also the .tflite signature's key).
export function outputTensors(manifest) {
  return (manifest.outputs || {}).tensors || [];
}

export function outputNames(manifest) {
  return outputTensors(manifest).map((t) => t.name);
}

// Position of the output whose role (key, else name) is `role`; -1 when there is none.
export function outputIndex(manifest, role) {
  return outputTensors(manifest).findIndex((t) => (t.key || t.name) === role);
}

// TF.js output names -> the .tflite signature's keys.
export function outputKeys(manifest) {
  return Object.fromEntries(outputTensors(manifest).filter((t) => t.key).map((t) => [t.name, t.key]));
}
