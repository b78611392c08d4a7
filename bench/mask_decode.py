"""The page's decode of a segmentation model's outputs (static/js/tensor/decode.js, "yolo-seg")
against the same head decoded as a detector's ("yolo-raw": boxes only), on TF.js's WASM backend
in Node, side by side in one run: what the masks cost a frame.

The outputs are synthetic but full size: a yolo11n-seg head at 640 px ([1, 4+80+32, 8400]) in
which N objects (default 20, apart from each other, so all N survive NMS) are seen by a few
anchors each, and prototypes [1, 160, 160, 32] of smooth random blobs, so every instance has a
mask to outline (one flat prototype that each instance weighs in keeps every mask from
coming out empty).

Prints the median ms per decode of each, the masks' share (segment - detect), and the ratio;
the target for the masks: <= 5 ms for 20 instances at 640 on WASM.

    .venv/bin/python -m bench.mask_decode [--instances 20] [--runs 30]
"""
from __future__ import annotations

import argparse
import json
import subprocess

import cv2
import numpy as np

from bench._results import ROOT, add_out_option, write_results

NC, NM, ANCHORS, SIDE = 80, 32, 8400, 640
TARGET_MS = 5.0

SCRIPT = """
import {readFileSync} from 'node:fs';
import {createRequire} from 'node:module';
const req = JSON.parse(readFileSync(0, 'utf8'));
const require = createRequire(req.root + '/');
const tf = require('@tensorflow/tfjs');
require('@tensorflow/tfjs-backend-wasm');
globalThis.tf = tf;
await tf.setBackend('wasm');
const {decode} = await import(req.decode);
const {makeTransform} = await import(req.geometry);
const head = tf.tensor(req.head, req.headShape, 'float32');
const protos = tf.tensor(req.protos, req.protosShape, 'float32');
const boxesOnly = tf.tidy(() => head.slice([0, 0, 0], [1, 4 + req.nc, -1]));
const frame = {transform: makeTransform(1, 1, 0, 0), width: req.side, height: req.side};
const options = {score: 0.25, iou: 0.7, maxDet: 100, classes: null};
async function timed(manifest, outputs) {
  const times = [];
  let found = [];
  for (let i = 0; i < req.runs + 3; i++) {   // 3 warm-up runs
    const t = performance.now();
    found = await decode(manifest, outputs, frame, options);
    if (i >= 3) times.push(performance.now() - t);
  }
  return {times, instances: found.length, polygons: found.filter((d) => d.polygons && d.polygons.length).length};
}
const input = {shape: [1, req.side, req.side, 3]};
const segment = await timed({outputs: {format: 'yolo-seg'}, labels: req.labels, input, nms: {agnostic: false}},
                            [head, protos]);
const detect = await timed({outputs: {format: 'yolo-raw'}, labels: req.labels, input, nms: {agnostic: false}},
                           [boxesOnly]);
process.stdout.write(JSON.stringify({segment, detect, backend: tf.getBackend(), tfjs: tf.version.tfjs}));
"""


def outputs(instances: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(head [1, 4+NC+NM, ANCHORS], prototypes [1, 160, 160, NM]) with ``instances`` objects on a
    grid (no two overlap), 3 anchors each, the other anchors below the score threshold."""
    rng = np.random.default_rng(seed)
    head = np.zeros((1, 4 + NC + NM, ANCHORS), np.float32)
    head[0, :4] = rng.uniform(40, 600, (4, ANCHORS))
    head[0, 4:4 + NC] = rng.uniform(0, 0.1, (NC, ANCHORS))
    head[0, 4 + NC:] = rng.normal(0, 0.5, (NM, ANCHORS))
    cols = int(np.ceil(np.sqrt(instances)))
    cell = SIDE / cols
    for k in range(instances):
        cx, cy = (k % cols + 0.5) * cell, (k // cols + 0.5) * cell
        coefficients, cls = rng.normal(0, 1, NM), int(rng.integers(NC))
        for j in range(3):
            a = 3 * k + j
            head[0, :4, a] = [cx + rng.normal(0, 2), cy + rng.normal(0, 2), 0.7 * cell, 0.6 * cell]
            head[0, 4 + cls, a] = rng.uniform(0.5, 0.9)
            head[0, 4 + NC:, a] = coefficients + rng.normal(0, 0.01, NM)
    coarse = rng.normal(0, 1, (8, 8, NM)).astype(np.float32)
    protos = np.stack([cv2.resize(coarse[:, :, m], (SIDE // 4, SIDE // 4), interpolation=cv2.INTER_CUBIC)
                       for m in range(NM)], -1)[None]
    # one flat prototype that every instance weighs in, so no mask comes out empty
    protos[..., 0] = 1.0
    head[0, 4 + NC, :3 * instances] = 1.5
    return head, protos


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--instances", type=int, default=20)
    parser.add_argument("--runs", type=int, default=30)
    add_out_option(parser, "mask_decode")
    args = parser.parse_args()

    head, protos = outputs(args.instances)
    request = {"root": str(ROOT), "decode": (ROOT / "static/js/tensor/decode.js").as_uri(),
               "geometry": (ROOT / "static/js/contract/geometry.js").as_uri(),
               "head": head.ravel().tolist(), "headShape": list(head.shape),
               "protos": protos.ravel().tolist(), "protosShape": list(protos.shape),
               "nc": NC, "side": SIDE, "runs": args.runs, "labels": [f"class{i}" for i in range(NC)]}
    proc = subprocess.run(["node", "--input-type=module", "-e", SCRIPT], cwd=ROOT, input=json.dumps(request),
                          capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise SystemExit(proc.stderr[-3000:])
    run = json.loads(proc.stdout)
    segment, detect = np.median(run["segment"]["times"]), np.median(run["detect"]["times"])
    masks = segment - detect
    print(f"TF.js {run['tfjs']} on {run['backend']} (Node), {args.runs} runs each, medians:")
    print(f"  yolo-seg decode: {segment:.2f} ms ({run['segment']['instances']} instances, "
          f"{run['segment']['polygons']} with outlines)")
    print(f"  yolo-raw decode of the same boxes: {detect:.2f} ms ({run['detect']['instances']} instances)")
    print(f"  masks alone: {masks:.2f} ms (target <= {TARGET_MS} ms for 20 at {SIDE} px)")
    print(f"  segment / detect decode: {segment / detect:.2f}x")
    results = {"backend": run["backend"], "tfjs": run["tfjs"], "instances": run["segment"]["instances"],
               "segment_ms": round(float(segment), 3), "detect_ms": round(float(detect), 3),
               "masks_ms": round(float(masks), 3), "ratio": round(float(segment / detect), 3),
               "target_masks_ms": TARGET_MS, "runs": args.runs}
    write_results("mask_decode", args, results)


if __name__ == "__main__":
    main()
