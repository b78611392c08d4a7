"""Detection page cost vs the bare model, per backend, in headless Chromium.

For each backend: median ms of the bare `executeAsync` on a prepared tensor, against the
median full per-frame pipeline of /detect (camera frame -> boxes drawn + results list),
measured side by side in one page. Prints pipeline/bare (target <= 1.10), and the time
from navigation to the first drawn result with a warm HTTP cache.

    .venv/bin/python bench/browser_detect.py [--models DIR] [--backends wasm webgl] [--frames 20]
"""
from __future__ import annotations

import tempfile
from pathlib import Path

from _browser import median, parse_args, server_and_browser

from converters.sources import load_photo
from tests.browser import fake_camera_flags, letterbox_rgb, write_y4m

FRAME_TIMES = """async (n) => {
  const list = document.getElementById('results');
  const seen = [];
  let last = +list.dataset.frame;
  while (seen.length < n) {
    await new Promise((r) => setTimeout(r, 5));
    if (+list.dataset.frame !== last) { last = +list.dataset.frame; seen.push(+list.dataset.totalMs); }
  }
  return seen;
}"""

# The same graph, loaded on the page's backend, timed on an already prepared input: the
# camera frame on the page's canvas, letterboxed (a zeros input would make the in-graph NMS
# look cheaper than it is on a real scene).
BARE_TIMES = """async ([url, n]) => {
  const model = await tf.loadGraphModel(url);
  const x = tf.tidy(() => {
    const frame = tf.browser.fromPixels(document.getElementById('view')).toFloat();
    const [h, w] = frame.shape;
    const s = Math.min(640 / w, 640 / h);
    const nh = Math.round(h * s), nw = Math.round(w * s);
    const top = Math.floor((640 - nh) / 2), left = Math.floor((640 - nw) / 2);
    const resized = tf.image.resizeBilinear(frame, [nh, nw], false, true);
    return tf.pad(resized, [[top, 640 - nh - top], [left, 640 - nw - left], [0, 0]], 114).div(255).expandDims(0);
  });
  const once = async () => {
    const t0 = performance.now();
    const out = await model.executeAsync(x);
    await (Array.isArray(out) ? out[0] : out).data();
    tf.dispose(out);
    return performance.now() - t0;
  };
  await once();
  const times = [];
  for (let i = 0; i < n; i++) times.push(await once());
  x.dispose(); model.dispose();
  return times;
}"""


def main() -> None:
    args = parse_args(__doc__)
    model_id = "yolov5n"
    with tempfile.TemporaryDirectory() as tmp:
        y4m = write_y4m(Path(tmp) / "bus.y4m", letterbox_rgb(load_photo("bus.jpg")))
        with server_and_browser(args.models, fake_camera_flags(y4m)) as (url, browser):
            print(f"{'backend':8s} {'bare ms':>9s} {'pipeline ms':>12s} {'ratio':>7s}  first result (warm cache)")
            for backend in args.backends:
                context = browser.new_context()
                page = context.new_page()
                page.goto(f"{url}/detect?model={model_id}&backend={backend}")
                page.wait_for_selector("#model-status[data-state='ready']", timeout=600_000)
                page.wait_for_function("() => +document.getElementById('results').dataset.frame >= 2",
                                       timeout=600_000)
                pipeline = median(page.evaluate(FRAME_TIMES, args.frames))
                page.click("#pause-button")
                bare = median(page.evaluate(BARE_TIMES, [f"/models/{model_id}/tfjs/model.json", args.frames]))
                # Warm cache: same context (HTTP cache + remembered backend), fresh navigation.
                page.goto(f"{url}/detect?model={model_id}&backend={backend}")
                page.wait_for_function("() => document.body.dataset.firstResultMs", timeout=600_000)
                first = float(page.evaluate("() => document.body.dataset.firstResultMs"))
                context.close()
                print(f"{backend:8s} {bare:9.1f} {pipeline:12.1f} {pipeline / bare:7.3f}  {first:.0f} ms")


if __name__ == "__main__":
    main()
