"""Server-side detection, side by side in one run:

The server runs as `make serve` runs it: `python -m server.front` (HAProxy + gunicorn) from the
serving install (.venv-serve, requirements-serve.txt's LiteRT; --python picks another).

1. Per-image latency: POST /api/v1/detect (YOLOv5n 640, LiteRT, gunicorn, 1 worker) vs the
   same checkpoint in PyTorch run the way yolov5's detect.py runs it (the checkpoint
   unpickled into converters/yolov5/modules.py's yolov5 modules, Conv+BN fused as ``model.fuse()``
   does, cv2 decode + letterbox, ``inference_mode``, torchvision NMS at the same thresholds),
   on the same JPEG bytes: decode + letterbox + model + NMS + boxes in source pixels for
   both; the API figure also includes HTTP and JSON. Interleaved, same thread count.
   Target: API >= 1.5x faster.
2. Throughput of /api/v1/detect with 1 vs 2 gunicorn workers (same total threads), at
   --clients concurrent clients (default 8).
3. Dynamic batching (server/inference/litert.py, DATARAILROAD_BATCH): req/s of
   /api/v1/detect (yolov5n) and /api/v1/classify (efficientnet-lite0, when installed) at
   --clients clients, without and with batching (up to 4 runs an invoke), 1 worker, 4 model
   threads and the same LiteRT threads either way.

usage: .venv/bin/python -m bench.server [--weights ../shared/models/yolov5n.pt] [--runs 30]
       [--threads 2] [--seconds 15] [--clients 8] [--models DIR] [--python .venv-serve/bin/python]
       [--out bench/results/server.json]
The yolov5n model folder is taken from --models (default ./models) or built there.
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

from bench._results import add_out_option, write_results
from modelcontract.boxes import box_iou
from harness.photos import photo_bytes
from harness.servers import ProductionServer


JPEG = {"Content-Type": "image/jpeg"}


SERVE_PYTHON = ROOT / ".venv-serve" / "bin" / "python"  # `make serve-install`


def serve(python: Path, models: Path, workers: int, infer_threads: int, env: dict | None = None) -> ProductionServer:
    return ProductionServer(models, workers, python=python,
                            env={"DATARAILROAD_INFER_THREADS": str(infer_threads), **(env or {})})


def litert_version(python: Path) -> str:
    import subprocess

    return subprocess.run([str(python), "-c", "from importlib.metadata import version; "
                           "print(version('ai-edge-litert'))"], capture_output=True, text=True, check=True).stdout.strip()


def post(server: ProductionServer, path: str, body: bytes, conn=None) -> tuple[int, bytes]:
    status, _, data = server.request("POST", path, body, JPEG, timeout=120, conn=conn)
    return status, data


def yolov5_letterbox(im, size: int = 640, color=(114, 114, 114)):
    """yolov5's utils/augmentations.py letterbox(auto=False): cv2 resize + border."""
    import cv2

    h, w = im.shape[:2]
    r = min(size / h, size / w)
    new_w, new_h = int(round(w * r)), int(round(h * r))
    dw, dh = (size - new_w) / 2, (size - new_h) / 2
    if (w, h) != (new_w, new_h):
        im = cv2.resize(im, (new_w, new_h), interpolation=cv2.INTER_LINEAR)
    top, bottom = int(round(dh - 0.1)), int(round(dh + 0.1))
    left, right = int(round(dw - 0.1)), int(round(dw + 0.1))
    return cv2.copyMakeBorder(im, top, bottom, left, right, cv2.BORDER_CONSTANT, value=color), r, (dw, dh)


def pytorch_detector(weights: Path, threads: int):
    """yolov5n in PyTorch the way yolov5's detect.py runs it: the checkpoint unpickled into
    the yolov5 modules (converters/yolov5/modules.py), Conv+BN fused (model.fuse()), cv2 decode and
    letterbox, inference_mode, NMS with torchvision at the converter's thresholds, boxes
    scaled back (scale_boxes)."""
    import cv2
    import numpy as np
    import torch
    import torchvision

    from converters import sources, yolov5
    from converters.yolov5 import modules as mods

    torch.set_num_threads(threads)
    model = yolov5.load_model(sources.local_weights(str(weights), yolov5.KIND, (".pt",)))
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, mods.Conv) and isinstance(m.bn, torch.nn.BatchNorm2d):
                conv, bn = m.conv, m.bn
                fused = torch.nn.Conv2d(conv.in_channels, conv.out_channels, conv.kernel_size, conv.stride,
                                        conv.padding, groups=conv.groups, bias=True)
                scale = bn.weight / torch.sqrt(bn.running_var + bn.eps)
                fused.weight.copy_(conv.weight * scale.view(-1, 1, 1, 1))
                fused.bias.copy_(bn.bias - bn.running_mean * scale)
                m.conv, m.bn = fused, torch.nn.Identity()
    model.eval()
    labels = yolov5.class_names(model)
    nms = yolov5.NMS

    def detect(jpeg: bytes, stages: dict | None = None) -> list[dict]:
        t0 = time.perf_counter()
        bgr = cv2.imdecode(np.frombuffer(jpeg, np.uint8), cv2.IMREAD_COLOR)
        h, w = bgr.shape[:2]
        padded, gain, (dw, dh) = yolov5_letterbox(bgr, yolov5.IMGSZ)
        x = np.ascontiguousarray(padded.transpose((2, 0, 1))[::-1])  # HWC BGR -> CHW RGB
        with torch.inference_mode():
            xt = torch.from_numpy(x).float().div_(255)[None]
            t1 = time.perf_counter()
            p = model(xt)[0]
            t2 = time.perf_counter()
            conf = p[:, 5:] * p[:, 4:5]
            score, label = conf.max(1)
            boxes = torch.cat((p[:, :2] - p[:, 2:4] / 2, p[:, :2] + p[:, 2:4] / 2), 1)
            keep = score > nms["score"]
            boxes, score, label = boxes[keep], score[keep], label[keep]
            idx = torchvision.ops.nms(boxes, score, nms["iou"])[:nms["max_det"]]
            b = boxes[idx].numpy().astype(np.float64)
        b[:, [0, 2]] = ((b[:, [0, 2]] - dw) / gain).clip(0, w)
        b[:, [1, 3]] = ((b[:, [1, 3]] - dh) / gain).clip(0, h)
        if stages is not None:
            for key, value in (("decode+letterbox", t1 - t0), ("model", t2 - t1),
                               ("nms+boxes", time.perf_counter() - t2)):
                stages.setdefault(key, []).append(value * 1e3)
        return [{"class_id": int(c), "label": labels[int(c)], "score": float(s), "box": [float(v) for v in box]}
                for box, s, c in zip(b, score[idx].numpy(), label[idx].numpy())]

    return detect


def throughput(server: ProductionServer, jpeg: bytes, seconds: float, clients: int, path: str = "/api/v1/detect") -> dict:
    stop_at = time.time() + seconds
    counts, errors = [0] * clients, [0] * clients

    def client(i):
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
        while time.time() < stop_at:
            try:
                status, _ = post(server, path, jpeg, conn=conn)
                counts[i] += 1
                errors[i] += status != 200
            except (OSError, http.client.HTTPException):
                errors[i] += 1
                conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
        conn.close()

    t0 = time.time()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.time() - t0
    return {"requests": sum(counts), "errors": sum(errors), "seconds": round(elapsed, 1),
            "rps": round(sum(counts) / elapsed, 2)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--weights", default=str(ROOT.parent / "shared" / "models" / "yolov5n.pt"))
    parser.add_argument("--models", default=str(ROOT / "models"))
    parser.add_argument("--runs", type=int, default=30, help="timed runs per image and side")
    parser.add_argument("--threads", type=int, default=2, help="CPU threads for LiteRT and for PyTorch")
    parser.add_argument("--seconds", type=float, default=15, help="per throughput measurement")
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients for throughput")
    parser.add_argument("--python", default=str(SERVE_PYTHON if SERVE_PYTHON.is_file() else Path(sys.executable)),
                        help="the Python the server runs on (default: the serving install's, as make serve)")
    add_out_option(parser, "server")
    args = parser.parse_args()
    python = Path(args.python)
    report: dict = {"load_average_at_start": round(os.getloadavg()[0], 2)}

    from converters import pipeline

    models = Path(args.models)
    if not (models / "yolov5n" / "manifest.json").is_file():
        pipeline.convert("yolov5n", weights=args.weights, out=models)
    images = {name: photo_bytes(name) for name in ("bus.jpg", "zidane.jpg")}
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at start")
    report["server_litert"] = litert_version(python)
    print(f"server: {python} (ai-edge-litert {report['server_litert']}) behind HAProxy")

    torch_detect = pytorch_detector(Path(args.weights), args.threads)
    server = serve(python, models, 1, args.threads)
    try:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
        for jpeg in images.values():  # warm-up: load, first inference
            for _ in range(3):
                post(server, "/api/v1/detect?model=yolov5n", jpeg, conn=conn)
                torch_detect(jpeg)
        print(f"\n1. per-image latency, {args.runs} interleaved runs per image, {args.threads} threads each side")
        print(f"{'image':<12}{'API (LiteRT) ms':>18}{'PyTorch ms':>14}{'ratio':>8}  same detections")
        ratios, api_stages, torch_stages = [], {}, {}
        for name, jpeg in images.items():
            api_ms, torch_ms, same = [], [], True
            for _ in range(args.runs):
                t0 = time.perf_counter()
                status, body = post(server, "/api/v1/detect?model=yolov5n", jpeg, conn=conn)
                api_ms.append((time.perf_counter() - t0) * 1e3)
                for key, value in json.loads(body)["timing_ms"].items():
                    api_stages.setdefault(key, []).append(value)
                t0 = time.perf_counter()
                reference = torch_detect(jpeg, torch_stages)
                torch_ms.append((time.perf_counter() - t0) * 1e3)
            got = json.loads(body)["detections"]
            same = status == 200 and [d["class_id"] for d in got] == [d["class_id"] for d in reference] and all(
                box_iou([g["box"]], [r["box"]])[0, 0] >= 0.9 for g, r in zip(got, reference))
            a, t = statistics.median(api_ms), statistics.median(torch_ms)
            ratios.append(t / a)
            report.setdefault("latency", {})[name] = {
                "api_ms": a, "api_p90_ms": sorted(api_ms)[int(0.9 * len(api_ms))], "pytorch_ms": t,
                "pytorch_p90_ms": sorted(torch_ms)[int(0.9 * len(torch_ms))], "pytorch_over_api": t / a,
                "same_detections": bool(same), "boxes": len(got)}
            print(f"{name:<12}{a:>12.1f} (p90 {sorted(api_ms)[int(0.9 * len(api_ms))]:.0f})"
                  f"{t:>9.1f} (p90 {sorted(torch_ms)[int(0.9 * len(torch_ms))]:.0f})"
                  f"{t / a:>7.2f}x  {'yes' if same else 'NO'} ({len(got)} boxes)")
        conn.close()
    finally:
        server.stop()

    def medians(stages):
        return ", ".join(f"{k} {statistics.median(v):.1f}" for k, v in stages.items())

    print(f"medians, ms: API (server side) {medians(api_stages)}")
    print(f"             PyTorch           {medians(torch_stages)}")
    ratio = statistics.mean(ratios)
    model_ratio = statistics.median(torch_stages["model"]) / statistics.median(api_stages["model"])
    print(f"API vs PyTorch: {ratio:.2f}x faster end to end (median latency ratio, mean over images; "
          f"target >= 1.5x: {'met' if ratio >= 1.5 else 'NOT met'}); model alone: LiteRT {model_ratio:.2f}x faster")
    report["stages_ms"] = {"api": {k: statistics.median(v) for k, v in api_stages.items()},
                           "pytorch": {k: statistics.median(v) for k, v in torch_stages.items()}}
    report["ratios"] = {"api_faster_than_pytorch": ratio, "litert_model_faster_than_pytorch_model": model_ratio}

    print(f"\n2. throughput of /api/v1/detect (bus.jpg), {args.clients} clients, {args.seconds:.0f} s each, "
          f"{args.threads} CPU threads in total")
    results = {}
    for workers in (1, 2):
        server = serve(python, models, workers, max(1, args.threads // workers))
        try:
            for _ in range(2 * workers + 2):
                post(server, "/api/v1/detect", images["bus.jpg"])
            results[workers] = throughput(server, images["bus.jpg"], args.seconds, args.clients)
        finally:
            server.stop()
        r = results[workers]
        print(f"  {workers} worker(s) x {max(1, args.threads // workers)} LiteRT thread(s): {r['rps']:.2f} req/s "
              f"({r['requests']} requests, {r['errors']} errors)")
    print(f"  2 workers vs 1: {results[2]['rps'] / max(results[1]['rps'], 1e-9):.2f}x")
    report["throughput"] = {f"{w}_workers": r for w, r in results.items()}
    report["ratios"]["2_workers_over_1"] = results[2]["rps"] / max(results[1]["rps"], 1e-9)

    print(f"\n3. dynamic batching, {args.clients} clients, {args.seconds:.0f} s each, 1 worker x "
          f"{args.threads} LiteRT thread(s)")
    # The same 4 model threads per worker either way: only the stacking differs.
    batching = {"without": {"DATARAILROAD_BATCH": "1", "DATARAILROAD_THREADS": "4"},
                "with": {"DATARAILROAD_BATCH": "4", "DATARAILROAD_THREADS": "4"}}
    endpoints = [("detect", "/api/v1/detect?model=yolov5n")]
    if (models / "efficientnet-lite0" / "manifest.json").is_file():
        endpoints.append(("classify", "/api/v1/classify?model=efficientnet-lite0"))
    for task, path in endpoints:
        rps = {}
        for label, env in batching.items():
            server = serve(python, models, 1, args.threads, env)
            try:
                for _ in range(3):
                    post(server, path, images["bus.jpg"])
                rps[label] = throughput(server, images["bus.jpg"], args.seconds, args.clients, path)
            finally:
                server.stop()
        print(f"  {task:<9} without {rps['without']['rps']:.2f} req/s, with {rps['with']['rps']:.2f} req/s "
              f"({rps['with']['rps'] / max(rps['without']['rps'], 1e-9):.2f}x; errors {rps['without']['errors']}"
              f"/{rps['with']['errors']})")
        report.setdefault("batching", {})[task] = {**rps, "with_over_without": rps["with"]["rps"] / max(
            rps["without"]["rps"], 1e-9), "env": batching}
    print(f"load average {os.getloadavg()[0]:.2f} at end (other processes share these CPUs)")
    write_results("server", args, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
