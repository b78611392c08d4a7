"""Classification page cost vs the bare model, per backend, in headless Chromium.

Bare: median ms of the model on an already prepared 224x224 tensor. Full: median ms per
image on /classify, from the dropped file to the top-5 bars in the DOM (decode, resize,
model, top-k, card). Prints full/bare per backend (target on litert-wasm <= 1.3), TF.js WASM
vs LiteRT.js WASM side by side, and the same .tflite in native LiteRT at --threads.

    .venv/bin/python -m bench.browser_classify [--models DIR] [--backends wasm litert-wasm webgl] [--frames 10]
                                               [--out bench/results/browser_classify.json]
"""
from __future__ import annotations

import numpy as np

from bench._browser import BARE_MODEL_TIMES, median, native_litert_ms, parse_args, server_and_browser
from bench._results import write_results
from harness.browser import drop_files
from harness.photos import photo_bytes


def main() -> None:
    args = parse_args("browser_classify", __doc__, backends=("wasm", "litert-wasm"))
    bus = photo_bytes("bus.jpg")
    rows = {}
    with server_and_browser(args.models) as (url, browser):
        print(f"{'model':22s} {'backend':12s} {'bare ms':>8s} {'per image ms':>13s} {'ratio':>7s}")
        page = browser.new_page()
        page.goto(f"{url}/classify")
        models = page.eval_on_selector_all("#model-select option", "os => os.map(o => o.value)")
        page.close()
        for model_id in models:
            per_image = {}
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
                stage_ms = [round(median([s[i] for s in stages]), 1) for i in range(4)]
                print("  decode, preprocess, model, total ms:", stage_ms)
                full = median(page.eval_on_selector_all(
                    ".result-card[data-total-ms]", "cs => cs.slice(0, -1).map(c => +c.dataset.totalMs)"))
                bare = median(page.evaluate(BARE_MODEL_TIMES, [model_id, backend, None, args.frames]))
                page.close()
                print(f"{model_id:22s} {backend:12s} {bare:8.1f} {full:13.1f} {full / bare:7.3f}")
                per_image[backend] = full
                rows.setdefault(model_id, {})[backend] = {
                    "bare_ms": bare, "per_image_ms": full, "per_image_over_bare": full / bare,
                    "stages_ms": dict(zip(("decode", "preprocess", "model", "total"), stage_ms))}
            x = np.zeros(manifest["input"]["shape"], np.float32)
            native = native_litert_ms(args.models / model_id / manifest["server"]["model"], x, args.threads, args.frames)
            print(f"{model_id:22s} {'native':12s} {native:8.1f}   (LiteRT, {args.threads} threads)")
            rows[model_id]["native_litert_ms"] = native
            if "wasm" in per_image and "litert-wasm" in per_image:
                print(f"  per image wasm / litert-wasm: {per_image['wasm'] / per_image['litert-wasm']:.2f}x")
                rows[model_id]["per_image_wasm_over_litert_wasm"] = per_image["wasm"] / per_image["litert-wasm"]
    write_results("browser_classify", args, {"models": rows}, chromium=True)


if __name__ == "__main__":
    main()
