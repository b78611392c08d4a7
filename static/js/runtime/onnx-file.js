// Reading an .onnx the visitor gives, before any runtime sees it: the graph's inputs and
// outputs (name, element type, shape) and the model's metadata_props, where Ultralytics'
// export writes its metadata (every value a string: Python's repr of lists and dicts).
// An ONNX file is one protobuf ModelProto; only the fields named below are read, the rest
// (the weights above all) skipped by their length.
import {ModelFileError} from './tflite-file.js';

// ONNX TensorProto.DataType, by value.
const ELEMENT_TYPES = {1: 'float32', 2: 'uint8', 3: 'int8', 4: 'uint16', 5: 'int16', 6: 'int32', 7: 'int64',
                       8: 'string', 9: 'bool', 10: 'float16', 11: 'float64', 16: 'bfloat16'};

// The fields of one protobuf message in bytes[start, end): [[field, wireType, value]], value a
// number (varint, as a Number: ONNX's sizes fit) or [start, end) of a length-delimited field.
function fields(b, start, end) {
  const out = [];
  let at = start;
  const varint = () => {
    let value = 0;
    let scale = 1;
    for (;;) {
      if (at >= end) throw new Error('a varint runs past its message');
      const byte = b[at++];
      value += (byte & 0x7f) * scale;
      if (byte < 0x80) return value;
      scale *= 128;
    }
  };
  while (at < end) {
    const key = varint();
    const field = Math.floor(key / 8);
    const wire = key & 7;
    if (wire === 0) out.push([field, wire, varint()]);
    else if (wire === 1) at += 8;
    else if (wire === 5) at += 4;
    else if (wire === 2) {
      const length = varint();
      if (at + length > end) throw new Error(`field ${field} runs past its message`);
      out.push([field, wire, [at, at + length]]);
      at += length;
    } else {
      throw new Error(`wire type ${wire}`);
    }
  }
  return out;
}

const text = (b, [start, end]) => new TextDecoder().decode(b.subarray(start, end));

// ValueInfoProto -> {name, dtype, shape} (a dimension without a value: its name, as a string).
function valueInfo(b, span) {
  const info = {name: '', dtype: null, shape: []};
  for (const [field, , value] of fields(b, ...span)) {
    if (field === 1) info.name = text(b, value);
    if (field !== 2) continue;
    for (const [f, , tensor] of fields(b, ...value)) {   // TypeProto.tensor_type
      if (f !== 1) continue;
      for (const [g, , v] of fields(b, ...tensor)) {
        if (g === 1) info.dtype = ELEMENT_TYPES[v] || `type ${v}`;
        if (g !== 2) continue;
        for (const [, , dim] of fields(b, ...v)) {       // TensorShapeProto.dim
          const [[kind, , size] = []] = fields(b, ...dim).filter(([k]) => k === 1 || k === 2);
          info.shape.push(kind === 1 ? size : kind === 2 ? text(b, size) : '?');
        }
      }
    }
  }
  return info;
}

// A protobuf ModelProto with a graph: its first bytes are ir_version (field 1, varint) or
// another field of ModelProto, and it parses to the end.
export function isOnnx(bytes) {
  return bytes.length > 16 && bytes[0] === 0x08;
}

// -> {inputs: [{name, dtype, shape}], outputs: [...], metadata: {key: value}, opsets: {domain: version}}
export function onnxModel(bytes) {
  try {
    const model = {inputs: [], outputs: [], metadata: {}, opsets: {}};
    let graph = null;
    for (const [field, , value] of fields(bytes, 0, bytes.length)) {
      if (field === 7) graph = value;
      if (field === 14) {
        const entry = Object.fromEntries(fields(bytes, ...value).map(([f, , v]) => [f, text(bytes, v)]));
        model.metadata[entry[1] || ''] = entry[2] || '';
      }
      if (field === 8) {
        const opset = Object.fromEntries(fields(bytes, ...value).map(([f, w, v]) => [f, w === 2 ? text(bytes, v) : v]));
        model.opsets[opset[1] || ''] = opset[2];
      }
    }
    if (!graph) throw new Error('no graph');
    const initializers = new Set();
    const values = [];
    for (const [field, , value] of fields(bytes, ...graph)) {
      if (field === 5) {   // an initializer: its name, to tell weights listed as inputs apart
        const [name] = fields(bytes, ...value).filter(([f]) => f === 8);
        if (name) initializers.add(text(bytes, name[2]));
      }
      if (field === 11 || field === 12) values.push([field, valueInfo(bytes, value)]);
    }
    model.inputs = values.filter(([f, v]) => f === 11 && !initializers.has(v.name)).map(([, v]) => v);
    model.outputs = values.filter(([f]) => f === 12).map(([, v]) => v);
    return model;
  } catch (err) {
    throw new ModelFileError(`could not be read as an ONNX model (${err.message}): it is cut short, or no ONNX model`);
  }
}
