// The models the visitor gave a page: kept in this browser's IndexedDB (never uploaded) for
// the next visit, registered as manifests so the page's session opens them like installed
// ones, and removed on request.
import {MODELS, allValues, deleteValue, saveValue} from './store.js';
import {forgetManifest, registerManifest} from './manifests.js';
import {PAGE_TASKS, readModelFiles, userManifest} from './model-file.js';

const urls = new Map();   // id -> the blob: URL a .tflite's or .onnx's manifest points at

// The same files given twice are one model: its id comes from their bytes.
async function idOf(bytes) {
  let hex;
  if (globalThis.crypto && crypto.subtle) {   // only in a secure context (HTTPS, localhost)
    const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', bytes));
    hex = Array.from(digest.subarray(0, 8), (b) => b.toString(16).padStart(2, '0')).join('');
  } else {
    let h = 0x811c9dc5;   // FNV-1a, 32 bits, and the length
    for (let i = 0; i < bytes.length; i++) h = Math.imul(h ^ bytes[i], 0x01000193) >>> 0;
    hex = `${h.toString(16).padStart(8, '0')}${bytes.length.toString(16)}`;
  }
  return `yours-${hex}`;
}

// A kept record -> its manifest, registered for this page.
function register(record) {
  const files = record.files.map((f) => new File([f.blob], f.name));
  if (record.model.kind !== 'tfjs' && !urls.has(record.id)) urls.set(record.id, URL.createObjectURL(files[0]));
  const manifest = userManifest(record.model, {id: record.id, url: urls.get(record.id), files, added: record.added});
  registerManifest(manifest);
  return manifest;
}

// The models kept for this page's task, oldest first, registered: [{record, manifest}].
export async function keptModels(pageTask) {
  let records = [];
  try {
    records = await allValues(MODELS);
  } catch { /* no IndexedDB (private mode): nothing kept */ }
  return records.filter((r) => PAGE_TASKS[pageTask].includes(r.model.task))
    .sort((a, b) => a.added - b.added)
    .map((record) => ({record, manifest: register(record)}));
}

// Files the visitor gave at once -> {record, manifest, kept}; throws ModelFileError
// (model-file.js) for files the page cannot run. kept: false when the browser refused to store
// them (the model then runs for this visit only).
export async function addModel(given, pageTask) {
  const {files, data, ...model} = await readModelFiles(given, pageTask);
  const bytes = data || new Uint8Array(await new Blob(files).arrayBuffer());   // a .tflite is read once
  const record = {id: await idOf(bytes), added: Date.now(), model,
                  files: files.map((f) => ({name: f.name, blob: new Blob([f])}))};
  let kept = true;
  try {
    await saveValue(record.id, record, MODELS);
  } catch {
    kept = false;
  }
  return {record, manifest: register(record), kept};
}

export async function removeModel(id) {
  forgetManifest(id);
  if (urls.has(id)) URL.revokeObjectURL(urls.get(id));
  urls.delete(id);
  try {
    await deleteValue(id, MODELS);
  } catch { /* it was never kept */ }
}
