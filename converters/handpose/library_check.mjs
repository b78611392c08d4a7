// End-to-end check of converted MediaPipe Hands models with the real consumer:
// @tensorflow-models/hand-pose-detection (runtime 'tfjs') on the TF.js WASM backend.
//
// usage: node library_check.mjs <request.json>
// request: {model_dir, detector: "tfjs/detector_full/model.json", landmark: "tfjs/landmark_full/model.json",
//           model_type: "full"|"lite", image: {file (raw RGB uint8), width, height}, out: "/abs/result.json",
//           backend: "wasm"}
// The library loads models by URL (tf.loadGraphModel); Node has no file:// handler without
// tfjs-node, so the model folder is served read-only on 127.0.0.1 for the duration of the run.
// Writes {hands: [{handedness, score, keypoints: [[x, y], ...21]}], ms, constants} to `out`.
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import {createRequire} from 'node:module';
import * as tf from '@tensorflow/tfjs';
import '@tensorflow/tfjs-backend-wasm';
import * as handPoseDetection from '@tensorflow-models/hand-pose-detection';

const require = createRequire(import.meta.url);
const libraryConstants = require('@tensorflow-models/hand-pose-detection/dist/tfjs/constants.js');

function serve(root) {
  const base = path.resolve(root);
  const server = http.createServer((req, res) => {
    const rel = decodeURIComponent(new URL(req.url, 'http://x').pathname);
    const file = path.resolve(base, '.' + rel);
    if (!file.startsWith(base + path.sep) || !fs.existsSync(file) || !fs.statSync(file).isFile()) {
      res.writeHead(404).end();
      return;
    }
    const type = file.endsWith('.json') ? 'application/json' : 'application/octet-stream';
    res.writeHead(200, {'Content-Type': type}).end(fs.readFileSync(file));
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

async function main() {
  const request = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
  await tf.setBackend(request.backend || 'wasm');
  await tf.ready();
  const server = await serve(request.model_dir);
  try {
    const url = `http://127.0.0.1:${server.address().port}/`;
    const detector = await handPoseDetection.createDetector(handPoseDetection.SupportedModels.MediaPipeHands, {
      runtime: 'tfjs',
      modelType: request.model_type,
      maxHands: 2,
      detectorModelUrl: url + request.detector,
      landmarkModelUrl: url + request.landmark,
    });
    const {file, width, height} = request.image;
    const raw = fs.readFileSync(file);
    const image = tf.tensor3d(new Int32Array(Uint8Array.from(raw)), [height, width, 3], 'int32');
    const t0 = performance.now();
    const hands = await detector.estimateHands(image, {staticImageMode: true, flipHorizontal: false});
    const ms = performance.now() - t0;
    image.dispose();
    detector.dispose();
    const out = hands.map((h) => ({
      handedness: h.handedness,
      score: h.score,
      keypoints: h.keypoints.map((k) => [k.x, k.y]),
      names: h.keypoints.map((k) => k.name),
    }));
    const constants = {
      anchors: libraryConstants.MPHANDS_DETECTOR_ANCHOR_CONFIGURATION,
      decode: libraryConstants.MPHANDS_TENSORS_TO_DETECTION_CONFIGURATION,
    };
    fs.writeFileSync(request.out, JSON.stringify({hands: out, ms, backend: tf.getBackend(), constants}));
  } finally {
    server.close();
  }
}

main().catch((err) => {
  console.error(err && err.stack ? err.stack : String(err));
  process.exit(1);
});
