"""Node runs of the pages' own modules (TF.js from this checkout's node_modules, CPU backend)."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from harness.paths import JS, ROOT


def node() -> str:
    """The node binary, else skip."""
    found = shutil.which("node")
    if found is None:
        pytest.skip("node is not installed")
    return found


def js_url(path: Path) -> str:
    """A file as a quoted import specifier, to paste into a Node script."""
    return json.dumps(Path(path).as_uri())


# Prefix for scripts that use TF.js from this checkout's node_modules (CPU backend).
TFJS_PRELUDE = """
import {createRequire} from 'node:module';
const require = createRequire(%s);
const tf = require('@tensorflow/tfjs');
globalThis.tf = tf;
await tf.setBackend('cpu');
""" % json.dumps(str(ROOT) + "/")


# Put before every script run_node runs: the payload, read from stdin, as `req`.
READ_REQUEST = "import {readFileSync} from 'node:fs';\nconst req = JSON.parse(readFileSync(0, 'utf8'));\n"


def run_node(script: str, payload=None, timeout: float = 300):
    """Run an ES-module script in Node (cwd: the checkout) with ``payload`` as JSON on stdin,
    which the script finds parsed as ``req``; returns what it printed, parsed as JSON."""
    proc = subprocess.run([node(), "--input-type=module", "-e", READ_REQUEST + script], cwd=ROOT, capture_output=True,
                          text=True, input=json.dumps(payload), timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


# static/js/tensor/decode.js's decode on given output tensors: {manifest, cases: [{outputs: [{data,
# shape}], transform: [sx, sy, ox, oy], width, height, options}]} -> [[detection]] per case.
DETECTOR_DECODE = TFJS_PRELUDE + """
const {decode} = await import(%s);
const {makeTransform} = await import(%s);
const out = [];
for (const c of req.cases) {
  const tensors = c.outputs.map((o) => tf.tensor(o.data, o.shape, 'float32'));
  const frame = {transform: makeTransform(...c.transform), width: c.width, height: c.height};
  out.push(await decode(req.manifest, tensors, frame, {classes: null, ...c.options}));
  tf.dispose(tensors);
}
process.stdout.write(JSON.stringify(out));
""" % (js_url(JS / "tensor/decode.js"), js_url(JS / "contract/geometry.js"))


def detector_js_decode(manifest: dict, cases: list[dict]) -> list[list[dict]]:
    """What the detect page shows for each case: outputs (arrays in the manifest's tensor
    order), transform (a Transform), width, height, options ({score, iou, maxDet})."""
    payload = {"manifest": manifest, "cases": [
        {"outputs": [{"data": np.asarray(o, np.float32).ravel().tolist(), "shape": list(np.shape(o))}
                     for o in c["outputs"]],
         "transform": [c["transform"].scale_x, c["transform"].scale_y, c["transform"].offset_x,
                       c["transform"].offset_y],
         "width": c["width"], "height": c["height"], "options": c["options"]} for c in cases]}
    return run_node(DETECTOR_DECODE, payload)
