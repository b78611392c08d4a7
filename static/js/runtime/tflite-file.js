// Reading a .tflite the visitor gives, before any runtime sees it: the FlatBuffer's input and
// output tensors (shape, type, quantization), and Ultralytics' metadata in the zip appended
// after it. Ultralytics wrote that zip two ways: `metadata.json` (JSON; the LiteRT export,
// 8.4.83 on) and, before it, one text file (`temp_meta.txt`, or `metadata.txt` with
// tflite_support) holding Python's repr of a dict. Ultralytics reads the second with
// ast.literal_eval; pythonLiteral below reads the same subset.

const u16 = (b, at) => b[at] | (b[at + 1] << 8);
const u32 = (b, at) => (b[at] | (b[at + 1] << 8) | (b[at + 2] << 16) | (b[at + 3] << 24)) >>> 0;

// What is wrong with a file, in words the visitor is shown as they are.
export class ModelFileError extends Error {}

// A FlatBuffer with TensorFlow Lite's file identifier ("TFL3" at bytes 4-7).
export function isTflite(bytes) {
  return bytes.length > 8 && String.fromCharCode(...bytes.subarray(4, 8)) === 'TFL3';
}

// The entries of a zip at the end of `bytes`: {name: {method, data}} (data still compressed),
// in the zip's order. Offsets in an appended zip count from the zip's own start, found from
// the end record.
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

// Python's repr of a dict of str, int, float, bool, None, list, tuple and dict -> its value
// (dict keys become strings, as JSON's). Throws SyntaxError on anything else.
export function pythonLiteral(text) {
  let at = 0;
  const fail = (what) => {
    throw new SyntaxError(`${what} at character ${at}`);
  };
  const space = () => {
    while (/\s/.test(text[at] || '')) at++;
  };
  const ESCAPES = {n: '\n', t: '\t', r: '\r', '\\': '\\', "'": "'", '"': '"', '0': '\0'};
  function string() {
    const quote = text[at++];
    let out = '';
    while (text[at] !== quote) {
      if (at >= text.length) fail('an unclosed string');
      if (text[at] !== '\\') {
        out += text[at++];
        continue;
      }
      const c = text[at + 1];
      const hex = {x: 2, u: 4, U: 8}[c];
      if (hex) {
        out += String.fromCodePoint(parseInt(text.slice(at + 2, at + 2 + hex), 16));
        at += 2 + hex;
      } else {
        out += c in ESCAPES ? ESCAPES[c] : `\\${c}`;
        at += 2;
      }
    }
    at++;
    return out;
  }
  function items(close) {
    const out = [];
    space();
    while (text[at] !== close) {
      out.push(value());
      space();
      if (text[at] === ',') at++;
      else if (text[at] !== close) fail(`"${close}" expected`);
      space();
    }
    at++;
    return out;
  }
  function dict() {
    const out = {};
    space();
    while (text[at] !== '}') {
      const key = value();
      space();
      if (text[at++] !== ':') fail('":" expected');
      // defineProperty: a key named __proto__ stays a key
      Object.defineProperty(out, String(key), {value: value(), enumerable: true, writable: true, configurable: true});
      space();
      if (text[at] === ',') at++;
      else if (text[at] !== '}') fail('"}" expected');
      space();
    }
    at++;
    return out;
  }
  function value() {
    space();
    const c = text[at];
    if (c === "'" || c === '"') return string();
    if (c === '{') return at++, dict();
    if (c === '[') return at++, items(']');
    if (c === '(') return at++, items(')');
    const word = /^(True|False|None|[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?|[-+]?inf|nan)/.exec(text.slice(at));
    if (!word) fail('a value expected');
    at += word[0].length;
    return {True: true, False: false, None: null}[word[0]] ?? Number(word[0].replace(/inf$/, 'Infinity'));
  }
  const out = value();
  space();
  if (at < text.length) fail('text after the value');
  return out;
}

// The Ultralytics metadata of a .tflite, or null when it has none: metadata.json, else the
// zip's first file as Python's repr of a dict (what Ultralytics' own reader falls back to;
// another file there, a label list say, is no Ultralytics metadata).
export async function tfliteMetadata(bytes) {
  const entries = zipEntries(bytes);
  if ('metadata.json' in entries) {
    try {
      return JSON.parse(await inflate(entries['metadata.json']));
    } catch (err) {
      if (err instanceof ModelFileError) throw err;
      throw new ModelFileError(`its metadata.json could not be read (${err.message})`);
    }
  }
  const [name] = Object.keys(entries);
  if (!name) return null;
  try {
    const value = pythonLiteral(await inflate(entries[name]));
    return value && typeof value === 'object' && !Array.isArray(value) ? value : null;
  } catch (err) {
    if (err instanceof ModelFileError) throw err;
    return null;
  }
}

// TensorFlow Lite's TensorType enum, by value.
const TENSOR_TYPES = ['float32', 'float16', 'int32', 'uint8', 'int64', 'string', 'bool', 'int16',
                      'complex64', 'int8', 'float64'];

// A FlatBuffer table at `pos`: field(i) -> where field i's value is, or 0 when absent.
function table(b, view, pos) {
  const vtable = pos - view.getInt32(pos, true);
  const size = u16(b, vtable);
  return (i) => (4 + 2 * i < size && u16(b, vtable + 4 + 2 * i) ? pos + u16(b, vtable + 4 + 2 * i) : 0);
}

// A vector field -> [start of its elements, its length]; [0, 0] when absent.
function vector(b, at) {
  if (!at) return [0, 0];
  const start = at + u32(b, at);
  return [start + 4, u32(b, start)];
}

// The first subgraph's inputs and outputs, and the types of all its tensors:
// {inputs: [{shape, dtype, scale, zeroPoint}], outputs: [...], types: Set of dtypes}.
// scale and zeroPoint are the tensor's first (per-tensor) quantization, or null.
export function tfliteTensors(bytes) {
  const b = bytes;
  const view = new DataView(b.buffer, b.byteOffset, b.byteLength);
  try {
    const model = table(b, view, u32(b, 0));
    const [subgraphs, count] = vector(b, model(2));
    if (!count) throw new Error('no subgraph');
    const subgraph = table(b, view, subgraphs + u32(b, subgraphs));
    const [tensors, nTensors] = vector(b, subgraph(0));
    const tensorAt = (i) => {
      if (i < 0 || i >= nTensors) throw new Error(`tensor ${i} of ${nTensors}`);
      const at = tensors + 4 * i;
      return table(b, view, at + u32(b, at));
    };
    const describe = (i) => {
      const t = tensorAt(i);
      const [shape, rank] = vector(b, t(0));
      const dtype = TENSOR_TYPES[t(1) ? b[t(1)] : 0] || `type ${b[t(1)]}`;
      let scale = null;
      let zeroPoint = null;
      if (t(4)) {
        const q = table(b, view, t(4) + u32(b, t(4)));
        const [scales, nScales] = vector(b, q(2));
        const [zeros, nZeros] = vector(b, q(3));
        if (nScales) scale = view.getFloat32(scales, true);
        if (nZeros) zeroPoint = Number(view.getBigInt64(zeros, true));
      }
      return {shape: Array.from({length: rank}, (_, k) => view.getInt32(shape + 4 * k, true)), dtype, scale, zeroPoint};
    };
    const indices = (field) => {
      const [start, n] = vector(b, subgraph(field));
      return Array.from({length: n}, (_, k) => view.getInt32(start + 4 * k, true));
    };
    const types = new Set(Array.from({length: nTensors}, (_, i) => {
      const t = tensorAt(i);
      return TENSOR_TYPES[t(1) ? b[t(1)] : 0];
    }));
    return {inputs: indices(1).map(describe), outputs: indices(2).map(describe), types};
  } catch (err) {
    throw new ModelFileError(`could not be read as a TensorFlow Lite FlatBuffer (${err.message}): it is cut short, or no TensorFlow Lite model`);
  }
}
