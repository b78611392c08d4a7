// A model the visitor gives the page (dropped or picked), read from its own files and never
// sent anywhere: an Ultralytics .tflite (`yolo export format=litert`, or format=tflite)
// carries its metadata as a zip with one metadata.json appended after the FlatBuffer; its
// TF.js export (Ultralytics 8.4.82 and earlier, and this project's converter) is a folder of
// model.json, weight shards and metadata.yaml. What the metadata says (task, class names,
// input size, keypoint shape) becomes a manifest like the converter's, so the pages run it with
// their own decode, answer check and tracking.
import TWINS from '../contract/twins.json' with {type: 'json'};

export const MAX_MODEL_BYTES = 400 * 1024 * 1024;   // beyond this, LiteRT.js's WASM heap gives out
export const PAGE_TASKS = {detect: ['detect', 'segment', 'pose', 'obb'], classify: ['classify']};
const FORMATS = {detect: 'yolo-raw', segment: 'yolo-seg', pose: 'yolo-pose', obb: 'yolo-obb', classify: 'probabilities'};
const PAGE_OF = {detect: '/detect', segment: '/detect', pose: '/detect', obb: '/detect', classify: '/classify'};
const NMS = {iou: 0.7, score: 0.25, max_det: 100, agnostic: false};   // Ultralytics' predict defaults
const EXPORT_HINT = 'export it with `yolo export model=best.pt format=litert` (Ultralytics 8.4.83 or later)';

// What the visitor is told, as is (the page keeps its model).
export class ModelFileError extends Error {}

// Files the model drop takes rather than the image / video input: a .tflite (or a checkpoint,
// to say why not), or a TF.js folder's files.
export function areModelFiles(files) {
  return files.some((f) => /\.(tflite|pt|pth)$/i.test(f.name || '') || f.name === 'model.json');
}

const u16 = (b, at) => b[at] | (b[at + 1] << 8);
const u32 = (b, at) => (b[at] | (b[at + 1] << 8) | (b[at + 2] << 16) | (b[at + 3] << 24)) >>> 0;

// A FlatBuffer with TensorFlow Lite's file identifier ("TFL3" at bytes 4-7).
export function isTflite(bytes) {
  return bytes.length > 8 && String.fromCharCode(...bytes.subarray(4, 8)) === 'TFL3';
}

// The entries of a zip at the end of `bytes`: {name: {method, data}} (data still compressed).
// Offsets in an appended zip count from the zip's own start, found from the end record.
export function zipEntries(bytes) {
  const last = bytes.length - 22;
  let end = -1;
  for (let i = last; i >= Math.max(0, last - 0xffff); i--) {
    if (u32(bytes, i) === 0x06054b50) {
      end = i;
      break;
    }
  }
  if (end < 0) return {};
  const count = u16(bytes, end + 10);
  const size = u32(bytes, end + 12);
  const base = end - size - u32(bytes, end + 16);   // where the zip starts in `bytes`
  const entries = {};
  let at = end - size;
  for (let n = 0; n < count && at >= 0 && u32(bytes, at) === 0x02014b50; n++) {
    const nameLength = u16(bytes, at + 28);
    const name = new TextDecoder().decode(bytes.subarray(at + 46, at + 46 + nameLength));
    const local = base + u32(bytes, at + 42);
    if (local < 0 || u32(bytes, local) !== 0x04034b50) break;
    const start = local + 30 + u16(bytes, local + 26) + u16(bytes, local + 28);
    entries[name] = {method: u16(bytes, at + 10), data: bytes.subarray(start, start + u32(bytes, at + 20))};
    at += 46 + nameLength + u16(bytes, at + 30) + u16(bytes, at + 32);
  }
  return entries;
}

async function inflate(entry) {
  if (entry.method === 0) return new TextDecoder().decode(entry.data);
  if (entry.method !== 8) throw new ModelFileError(`its metadata is compressed with zip method ${entry.method}, which the page cannot read`);
  const stream = new Blob([entry.data]).stream().pipeThrough(new DecompressionStream('deflate-raw'));
  return new Response(stream).text();
}

// The Ultralytics metadata of a .tflite, or null when it has none.
export async function tfliteMetadata(bytes) {
  const entry = zipEntries(bytes)['metadata.json'];
  if (!entry) return null;
  try {
    return JSON.parse(await inflate(entry));
  } catch (err) {
    if (err instanceof ModelFileError) throw err;
    throw new ModelFileError(`its metadata.json could not be read (${err.message})`);
  }
}

// metadata.names ({"0": "person", ...} or a list) -> labels in class order.
function labelsOf(names) {
  if (Array.isArray(names)) return names.map(String);
  const entries = Object.entries(names || {}).map(([k, v]) => [Number(k), String(v)]);
  if (!entries.length || entries.some(([k]) => !Number.isInteger(k))) return null;
  const labels = Array.from({length: Math.max(...entries.map(([k]) => k)) + 1}, (_, i) => `class ${i}`);
  for (const [k, v] of entries) labels[k] = v;
  return labels;
}

// The task, class names, input size and keypoint shape from Ultralytics' metadata, or the one
// reason the page can't run the model: {task, labels, imgsz: [h, w], kptShape}.
function readMetadata(name, metadata, pageTask) {
  const task = metadata.task;
  if (!FORMATS[task]) {
    throw new ModelFileError(`${name} is a model of task "${task}", which this app does not run (it runs ${Object.keys(FORMATS).join(', ')}).`);
  }
  if (!PAGE_TASKS[pageTask].includes(task)) {
    throw new ModelFileError(`${name} is a ${task} model: open it on ${PAGE_OF[task]}.`);
  }
  if (metadata.end2end) {
    throw new ModelFileError(`${name} has an end-to-end (NMS-free) head, whose output the page does not read yet: export it without nms=False (the default, nms=None, gives the raw head).`);
  }
  const labels = labelsOf(metadata.names);
  const imgsz = Array.isArray(metadata.imgsz) ? metadata.imgsz.map(Number) : [Number(metadata.imgsz), Number(metadata.imgsz)];
  if (!labels || !(imgsz[0] > 0 && imgsz[1] > 0) || (metadata.channels ?? 3) !== 3) {
    throw new ModelFileError(`${name}'s metadata lacks class names or an input size (or wants ${metadata.channels} channels): ${EXPORT_HINT}.`);
  }
  const kptShape = task === 'pose' ? (metadata.kpt_shape || []).map(Number) : null;
  if (kptShape && !(kptShape.length === 2 && kptShape[0] > 0 && [2, 3].includes(kptShape[1]))) {
    throw new ModelFileError(`${name} is a pose model without a usable kpt_shape in its metadata.`);
  }
  return {task, labels, imgsz, kptShape};
}

function tooLarge(name, bytes) {
  return new ModelFileError(`${name} is ${(bytes / 1048576).toFixed(0)} MB, too large to run in a browser tab (at most ${MAX_MODEL_BYTES / 1048576} MB): export a smaller model (n or s scale).`);
}

// What the page needs before it runs the files given at once, or the one reason it can't:
// a .tflite, or a TF.js folder's files (model.json, its shards, metadata.yaml).
// -> {kind: 'tflite' | 'tfjs', name, files: [File], data? (a .tflite's bytes, read already),
//     bytes (the size), metadata, task, labels, imgsz, kptShape, outputs?}
export async function readModelFiles(files, pageTask) {
  if (files.some((f) => f.name === 'model.json')) return readTfjsFolder(files, pageTask);
  const [file] = files;
  const name = file.name || 'model';
  if (/\.pt$|\.pth$/i.test(name)) {
    throw new ModelFileError(`${name} is a PyTorch checkpoint, which a browser cannot run (and loading one runs code): ${EXPORT_HINT}, or convert it with \`python -m converters yolo --weights ${name}\`.`);
  }
  if (/\.json$|\.bin$|\.yaml$/i.test(name)) {
    throw new ModelFileError(`${name} is part of a TF.js model: pick model.json, its .bin shards and metadata.yaml together.`);
  }
  if (file.size > MAX_MODEL_BYTES) throw tooLarge(name, file.size);
  const bytes = new Uint8Array(await file.arrayBuffer());
  if (!isTflite(bytes)) {
    throw new ModelFileError(`${name} is not a model this page can run: it takes a .tflite from Ultralytics' export (${EXPORT_HINT}) or a TF.js folder.`);
  }
  const metadata = await tfliteMetadata(bytes);
  if (!metadata) {
    throw new ModelFileError(`${name} is a .tflite without Ultralytics metadata (task, class names, input size), so the page cannot tell how to read its outputs: ${EXPORT_HINT}.`);
  }
  return {kind: 'tflite', name, files: [file], data: bytes, bytes: bytes.length, metadata,
          ...readMetadata(name, metadata, pageTask)};
}

// A TF.js graph model's output names from its model.json signature.
function signatureOutputs(graph) {
  const outputs = ((graph.signature || {}).outputs) || {};
  return Object.entries(outputs).map(([key, o]) => ({name: String(o.name || key).replace(/:0$/, '')}));
}

// model.json, every weight shard it names, and the metadata Ultralytics' TF.js export writes
// beside them (metadata.yaml; a metadata.json is read the same way).
async function readTfjsFolder(files, pageTask) {
  const byName = new Map(files.map((f) => [f.name, f]));
  let graph;
  try {
    graph = JSON.parse(await byName.get('model.json').text());
  } catch {
    throw new ModelFileError('model.json is not JSON: pick the model.json of a TF.js graph model.');
  }
  if (!graph.modelTopology || !Array.isArray(graph.weightsManifest) || (graph.format && graph.format !== 'graph-model')) {
    throw new ModelFileError('model.json is not a TF.js graph model (Ultralytics\' TF.js export writes one).');
  }
  const shards = graph.weightsManifest.flatMap((group) => group.paths.map((p) => p.split('/').pop()));
  const missing = shards.filter((p) => !byName.has(p));
  if (missing.length) {
    throw new ModelFileError(`model.json needs ${missing.join(', ')}: pick every file of the model's folder at once.`);
  }
  const bytes = files.reduce((sum, f) => sum + f.size, 0);
  if (bytes > MAX_MODEL_BYTES) throw tooLarge('the model', bytes);
  const metaFile = byName.get('metadata.yaml') || byName.get('metadata.json');
  if (!metaFile) {
    throw new ModelFileError('the folder has no metadata.yaml beside model.json (task, class names, input size): pick it too (Ultralytics\' TF.js export writes one).');
  }
  let metadata;
  try {
    const text = await metaFile.text();
    metadata = metaFile.name.endsWith('.json') ? JSON.parse(text) : (await import('js-yaml')).load(text);
  } catch (err) {
    throw new ModelFileError(`${metaFile.name} could not be read (${String(err.message).split('\n')[0]}).`);
  }
  if (!metadata || typeof metadata !== 'object') throw new ModelFileError(`${metaFile.name} holds no metadata.`);
  const name = `${metadata.description ? 'TF.js folder' : 'model.json'}`;
  const read = readMetadata('This TF.js model', metadata, pageTask);
  const ordered = [byName.get('model.json'), ...shards.map((p) => byName.get(p)), metaFile];
  return {kind: 'tfjs', name, files: ordered, bytes, metadata, outputs: signatureOutputs(graph), ...read};
}

// The outputs of an Ultralytics TF.js graph by role, in the order of their names (Identity,
// Identity_1): a detector's head, then a segmentation model's prototypes; a classifier's
// probabilities, then (the converter's graphs) its pooled features. model.json's signature
// names them without shapes: the order is the converter's own rule (ultralytics_yolo).
function tfjsTensors(model) {
  const roles = model.task === 'classify' ? ['probabilities', 'features'] : ['head', 'prototypes'];
  const byName = (a, b) => a.name.localeCompare(b.name, 'en', {numeric: true});
  return [...model.outputs].sort(byName).slice(0, 2).map((o, i) => ({name: o.name, key: roles[i], role: roles[i]}));
}

// A model the visitor gave (readModelFiles', kept by user-models.js) -> the manifest the pages
// read (the converter's layout: modelcontract/manifest.schema.json), with `url` (a .tflite's
// blob: URL) or `files` (a TF.js folder's). Ultralytics' LiteRT graph takes NCHW and gives
// boxes and keypoints over the input size and NCHW prototypes: ultralytics-graph.js turns that
// into the converter's layout. Its TF.js export is in that layout already (the converter runs
// the same export). No source framework is here to check answers against: every backend is
// held to the WASM backend's answer on the check pattern (model-open.js).
export function userManifest(model, {id, url, files, added}) {
  const {metadata, task, labels, imgsz, kptShape} = model;
  const [h, w] = imgsz;
  const classify = task === 'classify';
  const tflite = model.kind === 'tflite';
  const tensors = !tflite ? tfjsTensors(model)
    : classify ? [{name: 'probabilities', key: 'probabilities', shape: [1, labels.length]}]
    : [{name: 'head', key: 'head', role: 'head'},
       ...(task === 'segment' ? [{name: 'prototypes', key: 'prototypes', role: 'prototypes'}] : [])];
  const title = String(metadata.description || model.name).replace(/^Ultralytics /, '').replace(/ model trained on .*$/, '');
  const given = tflite ? `file ${model.name}` : 'TF.js model';
  return {
    id, title: `${title} (your ${given})`, task: classify ? 'classify' : 'detect', ultralytics_task: task,
    created: new Date(added).toISOString(), quantization: 'none',
    input: {shape: [1, h, w, 3], layout: 'NHWC', dtype: 'float32', color: 'RGB', range: [0, 1],
            resize: classify ? 'center-crop' : 'letterbox', ...(classify ? {crop_fraction: 1} : {pad_value: 114}),
            scale: 1 / 255, mean: [0, 0, 0], std: [1, 1, 1]},
    outputs: {format: FORMATS[task], tensors, execute: 'execute'},
    ...(classify ? {} : {nms: {...NMS, where: 'page'}}),
    ...(kptShape ? {kpt_shape: kptShape} : {}),
    labels,
    ...(tflite ? {litert: {model: {url, bytes: model.bytes}}, graph: 'ultralytics-litert', answer_reference: 'litert-wasm'}
      : {tfjs: {model: 'model.json'}, tfjsFiles: files, answer_reference: 'wasm'}),
    tolerance: TWINS.answers.tolerance.none,
    user: {file: tflite ? model.name : files.map((f) => f.name).join(', '), bytes: model.bytes, metadata},
  };
}
