// Runs a TF.js graph model in Node with the real TF.js runtime (the same kernels the
// browser's WASM/CPU backends use) so converters can measure parity with the source.
//
// usage: node run_tfjs.mjs <request.json>
// request: {model: "/abs/model.json", backend: "wasm"|"cpu",
//           inputs: [{name, shape, dtype, file}], outputs: [names] | null, out_dir}
// Writes <out_dir>/result.json ({outputs: [{name, shape, dtype, file}], ms}) and one
// little-endian binary file per output.
import fs from 'node:fs';
import path from 'node:path';
import * as tf from '@tensorflow/tfjs';
import '@tensorflow/tfjs-backend-wasm';

function loadArtifacts(modelJsonPath) {
  const dir = path.dirname(modelJsonPath);
  const json = JSON.parse(fs.readFileSync(modelJsonPath, 'utf8'));
  const weightSpecs = [];
  const buffers = [];
  for (const group of json.weightsManifest) {
    weightSpecs.push(...group.weights);
    for (const p of group.paths) buffers.push(fs.readFileSync(path.join(dir, p)));
  }
  const all = Buffer.concat(buffers);
  return {
    modelTopology: json.modelTopology,
    format: json.format,
    generatedBy: json.generatedBy,
    convertedBy: json.convertedBy,
    signature: json.signature,
    userDefinedMetadata: json.userDefinedMetadata,
    modelInitializer: json.modelInitializer,
    weightSpecs,
    weightData: all.buffer.slice(all.byteOffset, all.byteOffset + all.byteLength),
  };
}

const TYPED = {float32: Float32Array, int32: Int32Array, bool: Uint8Array};

async function main() {
  const request = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
  await tf.setBackend(request.backend || 'wasm');
  await tf.ready();
  const model = await tf.loadGraphModel(tf.io.fromMemory(loadArtifacts(request.model)));
  const feed = {};
  for (const input of request.inputs) {
    const raw = fs.readFileSync(input.file);
    const Typed = TYPED[input.dtype || 'float32'];
    const data = new Typed(raw.buffer, raw.byteOffset, raw.byteLength / Typed.BYTES_PER_ELEMENT);
    feed[input.name] = tf.tensor(data, input.shape, input.dtype || 'float32');
  }
  const names = request.outputs || model.outputs.map((o) => o.name);
  const t0 = performance.now();
  let result = await model.executeAsync(feed, names);
  const ms = performance.now() - t0;
  if (!Array.isArray(result)) result = [result];
  const outputs = [];
  for (let i = 0; i < result.length; i++) {
    const t = result[i];
    const data = await t.data();
    const file = path.join(request.out_dir, `output_${i}.bin`);
    fs.writeFileSync(file, Buffer.from(data.buffer, data.byteOffset, data.byteLength));
    outputs.push({name: names[i], shape: t.shape, dtype: t.dtype, file});
  }
  fs.writeFileSync(path.join(request.out_dir, 'result.json'),
                   JSON.stringify({backend: tf.getBackend(), version: tf.version.tfjs, ms, outputs}));
}

main().catch((err) => {
  console.error(err && err.stack ? err.stack : String(err));
  process.exit(1);
});
