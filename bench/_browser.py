"""Shared set-up for the browser benchmarks: models folder, live server, Chromium."""
from __future__ import annotations

import argparse
import statistics
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

from bench._results import add_out_option
from harness.browser import launch
from harness.servers import live_server


def parse_args(name: str, description: str, backends=("wasm", "webgl", "cpu"),
               seconds: float | None = None) -> argparse.Namespace:
    """The browser benches' options; --out defaults to bench/results/<name>.json."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", type=Path, default=ROOT / "models", help="models folder (default ./models)")
    parser.add_argument("--backends", nargs="+", default=list(backends))
    parser.add_argument("--frames", type=int, default=20, help="frames measured per backend")
    parser.add_argument("--threads", type=int, default=2, help="native LiteRT threads (the browser's limit here)")
    if seconds is not None:
        parser.add_argument("--seconds", type=float, default=seconds, help="live window per backend")
    add_out_option(parser, name)
    return parser.parse_args()


@contextmanager
def server_and_browser(models: Path, chromium_args=()):
    from playwright.sync_api import sync_playwright

    from server import create_app

    app = create_app({"MODELS_DIR": models.resolve()})
    with live_server(app) as url, sync_playwright() as p:
        browser = launch(p, chromium_args)
        try:
            yield url, browser
        finally:
            browser.close()


# The page's own time for each of the next n frames it shows, whole and by stage:
# [{total, preprocess, model, postprocess, draw}] in ms (#results data-total-ms,
# data-preprocess-ms, ...; total = input, model, decode and drawing).
FRAME_STAGES = """async (n) => {
  const list = document.getElementById('results');
  const seen = [];
  let last = +list.dataset.frame;
  while (seen.length < n) {
    await new Promise((r) => setTimeout(r, 5));
    if (+list.dataset.frame === last) continue;
    last = +list.dataset.frame;
    const d = list.dataset;
    seen.push({total: +d.totalMs, preprocess: +d.preprocessMs, model: +d.modelMs, postprocess: +d.postprocessMs, draw: +d.drawMs});
  }
  return seen;
}"""

# Frames drawn per second over a window of the live loop.
LIVE_FPS = """async (seconds) => {
  const list = document.getElementById('results');
  const f0 = +list.dataset.frame, t0 = performance.now();
  await new Promise((r) => setTimeout(r, seconds * 1000));
  return (+list.dataset.frame - f0) * 1000 / (performance.now() - t0);
}"""

def median(values):
    return statistics.median(values) if values else float("nan")


# The bare model on a backend, through the pages' own modules: TF.js graph or .tflite on
# LiteRT.js, on an input prepared by the page's preprocessing from `sourceId` (a canvas or
# image on the page; null = zeros). Returns ms per run (input copies included for LiteRT,
# as in the pages).
BARE_MODEL_TIMES = """async ([modelId, backend, sourceId, n]) => {
  const rt = await import('/static/js/runtime/runtime.js');
  const mf = await import('/static/js/contract/manifest.js');
  const {fetchManifest} = await import('/static/js/runtime/manifests.js');
  const litert = await import('/static/js/runtime/litert.js');
  const {prepareInput} = await import('/static/js/tensor/geometry.js');
  const manifest = await fetchManifest(modelId);
  await rt.useBackend(backend);
  const x = sourceId ? prepareInput(document.getElementById(sourceId), manifest.input).input
                     : tf.zeros(manifest.input.shape);
  let model;
  if (rt.isLiteRtBackend(backend)) {
    const artifact = mf.tfliteArtifact(manifest);
    model = await litert.loadTflite(artifact.url, backend.replace('litert-', ''), null, artifact.bytes);
  } else {
    model = await rt.loadModel(mf.graphUrl(manifest));
    model.needsAsync = manifest.outputs.execute === 'executeAsync';
  }
  const once = async () => {
    const t0 = performance.now();
    const out = await rt.runModel(model, x);
    await (Array.isArray(out) ? out[0] : out).data();
    tf.dispose(out);
    return performance.now() - t0;
  };
  await once();
  const times = [];
  for (let i = 0; i < n; i++) times.push(await once());
  x.dispose();
  model.dispose();
  return times;
}"""


def native_litert_ms(tflite: Path, x, threads: int, n: int) -> float:
    """Median ms of the same .tflite in native LiteRT (ai-edge-litert) at `threads`, on `x`
    (None: uniform noise of the model's input shape)."""
    import time

    import numpy as np
    from ai_edge_litert.interpreter import Interpreter

    interp = Interpreter(model_path=str(tflite), num_threads=threads)
    interp.allocate_tensors()
    index, shape = (interp.get_input_details()[0][key] for key in ("index", "shape"))
    if x is None:
        x = np.random.default_rng(0).uniform(0, 1, shape).astype(np.float32)
    times = []
    for i in range(n + 1):
        t0 = time.perf_counter()
        interp.set_tensor(index, x)
        interp.invoke()
        if i:  # the first run warms up
            times.append((time.perf_counter() - t0) * 1e3)
    return median(times)
