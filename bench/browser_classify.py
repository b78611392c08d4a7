"""Classification page cost vs the bare model, per backend, in headless Chromium.

Bare: median ms of the model on an already prepared 224x224 tensor. Full: median ms per
image on /classify, from the dropped file to the top-5 bars in the DOM (decode, resize,
model, top-k, card). Prints full/bare (target <= 1.15).

    .venv/bin/python bench/browser_classify.py [--models DIR] [--backends wasm webgl] [--frames 10]
"""
from __future__ import annotations

from _browser import median, parse_args, server_and_browser

from converters.sources import photo_path
from tests.browser import drop_files

BARE_TIMES = """async ([url, shape, n]) => {
  const model = await tf.loadGraphModel(url);
  const x = tf.zeros(shape);
  const once = async () => {
    const t0 = performance.now();
    const out = model.execute(x);
    await out.data();
    out.dispose();
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
    bus = photo_path("bus.jpg").read_bytes()
    with server_and_browser(args.models) as (url, browser):
        print(f"{'model':22s} {'backend':8s} {'bare ms':>8s} {'per image ms':>13s} {'ratio':>7s}")
        page = browser.new_page()
        page.goto(f"{url}/classify")
        models = page.eval_on_selector_all("#model-select option", "os => os.map(o => o.value)")
        page.close()
        for model_id in models:
            for backend in args.backends:
                page = browser.new_page()
                page.goto(f"{url}/classify?backend={backend}")
                page.wait_for_selector("#model-status[data-state='ready']", timeout=600_000)
                if page.input_value("#model-select") != model_id:
                    page.select_option("#model-select", model_id)
                    page.wait_for_function(
                        "id => document.getElementById('status-line').textContent.includes(' on ')"
                        " && document.getElementById('model-status').dataset.state === 'ready'", arg=model_id,
                        timeout=600_000)
                manifest = page.evaluate("id => fetch(`/models/${id}/manifest.json`).then(r => r.json())", model_id)
                drop_files(page, "#dropzone", [("warm.jpg", "image/jpeg", bus)])
                page.wait_for_function("() => +document.getElementById('cards').dataset.done >= 1", timeout=600_000)
                drop_files(page, "#dropzone", [(f"bus_{i}.jpg", "image/jpeg", bus) for i in range(args.frames)])
                page.wait_for_function("n => +document.getElementById('cards').dataset.done >= n",
                                       arg=args.frames + 1, timeout=600_000)
                stages = page.eval_on_selector_all(".result-card[data-total-ms]", "cs => cs.slice(0, -1).map(c => [+c.dataset.decodeMs, +c.dataset.preprocessMs, +c.dataset.ms, +c.dataset.totalMs])")
                print("  decode, preprocess, model, total ms:", [round(median([s[i] for s in stages]), 1) for i in range(4)])
                full = median(page.eval_on_selector_all(
                    ".result-card[data-total-ms]", "cs => cs.slice(0, -1).map(c => +c.dataset.totalMs)"))
                url_json = f"/models/{model_id}/{manifest['tfjs']['model']}"
                bare = median(page.evaluate(BARE_TIMES, [url_json, manifest["input"]["shape"], args.frames]))
                page.close()
                print(f"{model_id:22s} {backend:8s} {bare:8.1f} {full:13.1f} {full / bare:7.3f}")


if __name__ == "__main__":
    main()
