// A model the visitor gives the page (dropped or picked), read from its own files and never
// sent anywhere: an Ultralytics .tflite (`yolo export format=litert`, or format=tflite)
// carries its metadata as a zip with one metadata.json appended after the FlatBuffer; its
// TF.js export (Ultralytics 8.4.82 and earlier, and this project's converter) is a folder of
// model.json, weight shards and metadata.yaml. What the metadata says (task, class names,
// input size, keypoint shape) becomes a manifest like the converter's, so the pages run it with
// their own decode, answer check and tracking.
import TWINS from '../contract/twins.json' with {type: 'json'};
import {ModelFileError, isTflite, pythonLiteral, tfliteMetadata, tfliteTensors} from './tflite-file.js';
import {isOnnx, onnxModel} from './onnx-file.js';

export {ModelFileError};

export const MAX_MODEL_BYTES = 400 * 1024 * 1024;   // beyond this, LiteRT.js's WASM heap gives out
export const PAGE_TASKS = {detect: ['detect', 'segment', 'pose', 'obb', 'semantic', 'depth'], classify: ['classify']};
const FORMATS = {detect: 'yolo-raw', segment: 'yolo-seg', pose: 'yolo-pose', obb: 'yolo-obb', classify: 'probabilities',
                 semantic: 'yolo-semantic', depth: 'yolo-depth'};
const PAGE_OF = {classify: '/classify'};   // every other task: /detect
const DENSE_ROLES = {semantic: 'logits', depth: 'depth'};   // a dense model's one output
const NMS = {iou: 0.7, score: 0.25, max_det: 100, agnostic: false};   // Ultralytics' predict defaults
const EXPORT_HINT = 'export it with `yolo export model=best.pt format=litert` (Ultralytics 8.4.83 or later)';

// Files the model drop takes rather than the image / video input: a .tflite or .onnx (or a checkpoint,
// to say why not), or a TF.js folder's files.
export function areModelFiles(files) {
  return files.some((f) => /\.(tflite|onnx|pt|pth)$/i.test(f.name || '') || f.name === 'model.json');
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

// Ultralytics' reader turns these fields from text when a metadata form kept them as text.
function parsedFields(metadata) {
  const out = {...metadata};
  for (const key of ['imgsz', 'names', 'kpt_shape', 'args', 'end2end', 'channels']) {
    if (typeof out[key] !== 'string') continue;
    try {
      out[key] = pythonLiteral(out[key]);
    } catch { /* left as it is: readMetadata says what is missing */ }
  }
  return out;
}

// The task, class names, input size and keypoint shape from Ultralytics' metadata, or the one
// reason the page can't run the model: {task, labels, imgsz: [h, w], kptShape, end2end}.
// end2end: the outputs are detections after NMS ([1, N, 6 + extras]), from a model exported
// with nms=True or an NMS-free head (YOLO26), as Ultralytics' own reader decides.
function readMetadata(name, given, pageTask) {
  const metadata = parsedFields(given);
  const task = metadata.task;
  if (!task) {
    throw new ModelFileError(`${name}'s metadata names no task, so the page cannot tell how to read its outputs: ${EXPORT_HINT}.`);
  }
  if (!FORMATS[task]) {
    throw new ModelFileError(`${name} is a model of task "${task}", which this app does not run (it runs ${Object.keys(FORMATS).join(', ')}).`);
  }
  if (!PAGE_TASKS[pageTask].includes(task)) {
    throw new ModelFileError(`${name} is a ${task} model: open it on ${PAGE_OF[task] || '/detect'}.`);
  }
  const labels = labelsOf(metadata.names);
  const imgsz = Array.isArray(metadata.imgsz) ? metadata.imgsz.map(Number) : [Number(metadata.imgsz), Number(metadata.imgsz)];
  if (!labels || !(imgsz[0] > 0 && imgsz[1] > 0) || Number(metadata.channels ?? 3) !== 3) {
    throw new ModelFileError(`${name}'s metadata lacks class names or an input size (or wants ${metadata.channels} channels): ${EXPORT_HINT}.`);
  }
  const kptShape = task === 'pose' ? (metadata.kpt_shape || []).map(Number) : null;
  if (kptShape && !(kptShape.length === 2 && kptShape[0] > 0 && [2, 3].includes(kptShape[1]))) {
    throw new ModelFileError(`${name} is a pose model without a usable kpt_shape in its metadata.`);
  }
  // only a detector's head can hold NMS (a classifier's and a dense model's never do)
  const end2end = PAGE_TASKS.detect.slice(0, 4).includes(task) && Boolean(metadata.end2end || (metadata.args || {}).nms);
  return {task, labels, imgsz, kptShape, end2end};
}

// LiteRT.js (2.5) feeds and reads float32, int32 and uint8 tensors only.
const RUNNABLE = ['float32', 'uint8'];

// How a .tflite is laid out, from its tensors, or the one reason the page can't feed it:
// {layout: 'NHWC' (TensorFlow / onnx2tf exports) | 'NCHW' (LiteRT export), input, outputs
// (each {shape, dtype, scale, zeroPoint}), weights: 'int8' | 'float16' | 'float32'}.
function readTensors(name, bytes, imgsz) {
  let read;
  try {
    read = tfliteTensors(bytes);
  } catch (err) {
    throw new ModelFileError(`${name} ${err.message}.`);
  }
  const {inputs, outputs, types} = read;
  const [h, w] = imgsz;
  const [input] = inputs;
  if (inputs.length !== 1) throw new ModelFileError(`${name} takes ${inputs.length} inputs; an Ultralytics model takes one image.`);
  const other = [input, ...outputs].find((t) => !RUNNABLE.includes(t.dtype));
  const verb = other === input ? 'takes' : 'gives';
  if (other && ['int8', 'int16'].includes(other.dtype)) {
    throw new ModelFileError(`${name} ${verb} ${other.dtype} tensors (a full-integer export), which LiteRT.js in the browser cannot ${other === input ? 'feed' : 'read'} (it takes float32 and uint8): export it with int8=True and the default float input and output (\`yolo export model=best.pt format=litert int8=True\`), or run this file with Ultralytics' predict().`);
  }
  if (other) throw new ModelFileError(`${name} ${verb} ${other.dtype} tensors, which the page cannot ${other === input ? 'feed' : 'read'} (it reads float32 and uint8).`);
  const shape = input.shape.join();
  const layout = shape === [1, h, w, 3].join() ? 'NHWC' : shape === [1, 3, h, w].join() ? 'NCHW' : null;
  if (!layout) {
    throw new ModelFileError(`${name}'s input is [${input.shape}], not the [1, ${h}, ${w}, 3] (or [1, 3, ${h}, ${w}]) its metadata's image size says.`);
  }
  if (input.dtype === 'uint8' && !(input.scale > 0)) {
    throw new ModelFileError(`${name} takes uint8 input without a quantization scale, so the page cannot tell how to feed it.`);
  }
  const weights = types.has('int8') ? 'int8' : types.has('float16') ? 'float16' : 'float32';
  return {layout, input, outputs, weights};
}

function tooLarge(name, bytes) {
  return new ModelFileError(`${name} is ${(bytes / 1048576).toFixed(0)} MB, too large to run in a browser tab (at most ${MAX_MODEL_BYTES / 1048576} MB): export a smaller model (n or s scale).`);
}

// What the page needs before it runs the files given at once, or the one reason it can't:
// a .tflite, an .onnx, or a TF.js folder's files (model.json, its shards, metadata.yaml).
// -> {kind: 'tflite' | 'onnx' | 'tfjs', name, files: [File], data? (a file's bytes, read already),
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
  if (/\.onnx$/i.test(name) || (!isTflite(bytes) && isOnnx(bytes))) return readOnnx(name, file, bytes, pageTask);
  if (!isTflite(bytes)) {
    throw new ModelFileError(`${name} is not a model this page can run: it takes a .tflite or an .onnx from Ultralytics' export (${EXPORT_HINT}) or a TF.js folder.`);
  }
  let metadata;
  try {
    metadata = await tfliteMetadata(bytes);
  } catch (err) {
    throw new ModelFileError(`${name}: ${err.message}.`);
  }
  if (!metadata) {
    throw new ModelFileError(`${name} is a .tflite without Ultralytics metadata (task, class names, input size), so the page cannot tell how to read its outputs: ${EXPORT_HINT}.`);
  }
  const read = readMetadata(name, metadata, pageTask);
  return {kind: 'tflite', name, files: [file], data: bytes, bytes: bytes.length, metadata, ...read,
          tensors: readTensors(name, bytes, read.imgsz)};
}

// ONNX Runtime Web's element types for a model's input (an int8 ONNX from a quantizer keeps
// float input and output too).
const ONNX_INPUTS = ['float32', 'float16'];

// An .onnx from `yolo export format=onnx` (nms, half, dynamic as exported): NCHW in, the head
// and any detections after NMS in input pixels; metadata in its metadata_props.
function readOnnx(name, file, bytes, pageTask) {
  let model;
  try {
    model = onnxModel(bytes);
  } catch (err) {
    throw new ModelFileError(`${name} ${err.message}.`);
  }
  if (!model.metadata.task) {
    throw new ModelFileError(`${name} is an .onnx without Ultralytics metadata (task, class names, input size), so the page cannot tell how to read its outputs: export it with \`yolo export model=best.pt format=onnx\`.`);
  }
  const read = readMetadata(name, model.metadata, pageTask);
  const [h, w] = read.imgsz;
  const [input] = model.inputs;
  if (model.inputs.length !== 1) throw new ModelFileError(`${name} takes ${model.inputs.length} inputs; an Ultralytics model takes one image.`);
  if (!ONNX_INPUTS.includes(input.dtype)) {
    const given = input.dtype ? `${input.dtype} input` : 'an input of no tensor type';
    throw new ModelFileError(`${name} takes ${given}; the page feeds float32 or float16.`);
  }
  // A dynamic export names its batch, height and width: the page feeds one image at the
  // metadata's size.
  const shape = input.shape.map((d, i) => (typeof d === 'number' ? d : [1, 3, h, w][i]));
  if (shape.join() !== [1, 3, h, w].join()) {
    throw new ModelFileError(`${name}'s input is [${input.shape}], not the [1, 3, ${h}, ${w}] its metadata's image size says.`);
  }
  const weights = input.dtype === 'float16' || String((parsedFields(model.metadata).args || {}).half) === 'true' ? 'float16' : 'float32';
  return {kind: 'onnx', name, files: [file], data: bytes, bytes: bytes.length, metadata: model.metadata, ...read,
          tensors: {layout: 'NCHW', units: 'pixels', weights, input: {name: input.name, shape, dtype: input.dtype},
                    outputs: model.outputs.map((o) => ({name: o.name, shape: o.shape, dtype: o.dtype})),
                    dynamic: input.shape.some((d) => typeof d !== 'number')}};
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
  if (read.end2end) {
    const why = (parsedFields(metadata).args || {}).nms ? 'was exported with NMS inside (nms=True)' : 'has an NMS-free (end-to-end) head';
    throw new ModelFileError(`This TF.js model ${why}, whose TF.js graph the page does not read: export it as a .tflite or .onnx instead.`);
  }
  const ordered = [byName.get('model.json'), ...shards.map((p) => byName.get(p)), metaFile];
  return {kind: 'tfjs', name, files: ordered, bytes, metadata, outputs: signatureOutputs(graph), ...read};
}

// The outputs of an Ultralytics TF.js graph by role, in the order of their names (Identity,
// Identity_1): a detector's head, then a segmentation model's prototypes; a classifier's
// probabilities, then (the converter's graphs) its pooled features. model.json's signature
// names them without shapes: the order is the converter's own rule (ultralytics_yolo).
function tfjsTensors(model) {
  const roles = model.task === 'classify' ? ['probabilities', 'features']
    : DENSE_ROLES[model.task] ? [DENSE_ROLES[model.task]] : ['head', 'prototypes'];
  const byName = (a, b) => a.name.localeCompare(b.name, 'en', {numeric: true});
  return [...model.outputs].sort(byName).slice(0, 2).map((o, i) => ({name: o.name, key: roles[i], role: roles[i]}));
}

// What kind of file it is, in words for the model card.
function formatOf(model, io) {
  if (!io) return "Ultralytics' TF.js export";
  const kind = model.kind === 'onnx' ? `ONNX (NCHW input${io.dynamic ? ', dynamic shapes' : ''})`
    : io.layout === 'NHWC' ? 'TensorFlow Lite (onnx2tf export, NHWC input)' : 'LiteRT export (NCHW input)';
  const weights = {int8: 'int8 weights', float16: 'float16 weights', float32: 'float32'}[io.weights];
  const uint8 = (t) => t && t.dtype === 'uint8';
  const quantized = [uint8(io.input) && 'uint8 input', (io.outputs || []).some(uint8) && 'uint8 outputs'].filter(Boolean)
    .map((t) => `, ${t}`).join('');
  const nms = !model.end2end ? '' : (parsedFields(model.metadata).args || {}).nms ? ', NMS inside' : ', NMS-free head';
  return `${kind}, ${weights}${quantized}${nms}`;
}

// A model the visitor gave (readModelFiles', kept by user-models.js) -> the manifest the pages
// read (the converter's layout: modelcontract/manifest.schema.json), with `url` (a .tflite's
// blob: URL) or `files` (a TF.js folder's). Ultralytics' LiteRT graph takes NCHW and gives
// boxes and keypoints over the input size and NCHW prototypes: tensor/ultralytics-graph.js
// turns that into the converter's layout. Its TF.js export is in that layout already (the converter runs
// the same export). No source framework is here to check answers against: every backend is
// held to the WASM backend's answer on the check pattern (model-open.js).
export function userManifest(model, {id, url, files, added}) {
  const {metadata, task, labels, imgsz, kptShape} = model;
  const [h, w] = imgsz;
  const classify = task === 'classify';
  const dense = DENSE_ROLES[task];
  const single = model.kind !== 'tfjs';   // one file: a .tflite or an .onnx
  const tensors = !single ? tfjsTensors(model)
    : classify ? [{name: 'probabilities', key: 'probabilities', shape: [1, labels.length]}]
    : dense ? [{name: dense, key: dense, role: dense}]
    : [{name: 'head', key: 'head', role: 'head'},
       ...(task === 'segment' ? [{name: 'prototypes', key: 'prototypes', role: 'prototypes'}] : [])];
  const title = String(metadata.description || model.name).replace(/^Ultralytics /, '').replace(/ model trained on .*$/, '');
  const given = single ? `file ${model.name}` : 'TF.js model';
  // Kept records from before the tensors were read are LiteRT exports (nothing else opened).
  const io = single ? model.tensors || {layout: 'NCHW', weights: 'float32'} : null;
  const runs = {
    tflite: {litert: {model: {url, bytes: model.bytes}}, graph: 'ultralytics-litert', answer_reference: 'litert-wasm'},
    onnx: {onnx: {model: {url, bytes: model.bytes}}, graph: 'ultralytics-onnx', answer_reference: 'onnx-wasm'},
    tfjs: {tfjs: {model: 'model.json'}, tfjsFiles: files, answer_reference: 'wasm'},
  }[model.kind];
  return {
    id, title: `${title} (your ${given})`, task: classify ? 'classify' : 'detect', ultralytics_task: task,
    created: new Date(added).toISOString(), quantization: io && io.weights !== 'float32' ? io.weights : 'none',
    input: {shape: [1, h, w, 3], layout: 'NHWC', dtype: 'float32', color: 'RGB', range: [0, 1],
            ...(classify ? {resize: 'center-crop', crop_fraction: 1}
              : task === 'depth' ? {resize: 'stretch'} : {resize: 'letterbox', pad_value: 114}),
            scale: 1 / 255, mean: [0, 0, 0], std: [1, 1, 1]},
    outputs: {format: FORMATS[task], tensors, execute: 'execute'},
    ...(classify || dense ? {} : {nms: {...NMS, where: model.end2end ? 'model' : 'page'}}),
    ...(kptShape ? {kpt_shape: kptShape} : {}),
    ...(io ? {file_io: {...io, end2end: Boolean(model.end2end)}} : {}),
    labels,
    ...runs,
    tolerance: TWINS.answers.tolerance.none,
    user: {file: single ? model.name : files.map((f) => f.name).join(', '), bytes: model.bytes, metadata,
           format: formatOf(model, io)},
  };
}
