"""Model cards: what a user should know about a model before trusting it, from its manifest.

``card(manifest)`` is the one place a card is built: ``GET /api/v1/models/<id>`` returns it
and the pages embed the same JSON (templates/_model_card.html), which static/js/ui/modelcard.js
renders. So the page and the API cannot disagree. Fields a manifest lacks (older builds have
no licence, speed or agreement) come out as "unknown" or null, never as an error.
"""
from __future__ import annotations

import math
import re

from modelcontract import manifest as contract

from . import manifests

# How the parity reference runtimes read in a sentence.
RUNTIME_NAMES = {"pytorch": "PyTorch", "torch": "PyTorch", "tf_keras": "Keras", "keras": "Keras",
                 "tensorflow": "TensorFlow", "litert": "LiteRT", "tflite": "LiteRT", "onnx": "ONNX Runtime"}
SHA256_HEX = re.compile(r"[0-9a-f]{64}")
PREFIX = 8  # hex digits of a sha256 shown at a glance


def scientific(value: float) -> str:
    """3.6e-6, not 3.6e-06: the short form people write."""
    mantissa, exponent = f"{value:.1e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def runtime_name(runtime: str | None) -> str:
    return RUNTIME_NAMES.get(str(runtime).lower(), str(runtime)) if runtime else "the source framework"


def digest(sha256) -> dict:
    """A sha256 and its short prefix; a pseudo-digest ("random-seed0") has no prefix."""
    text = str(sha256 or "")
    real = bool(SHA256_HEX.fullmatch(text))
    return {"sha256": text if real else None, "sha256_prefix": text[:PREFIX] if real else None,
            "note": None if real or not text else text}


def source_of(manifest: dict) -> dict:
    """Where the weights came from (the build machine's local paths are left out)."""
    src = manifest.get("source") or {}
    out = {"kind": src.get("kind") or "unknown", "url": src.get("url"), **digest(src.get("sha256")),
           "package": src.get("package"), "origin": src.get("origin"), "random_weights": manifests.has_random_weights(manifest)}
    files = src.get("files")
    if isinstance(files, dict):  # a model of several parts (handpose): each part's own digest
        out["parts"] = [{"part": name, **digest((info or {}).get("sha256"))} for name, info in files.items()]
    return out


def licence_of(manifest: dict) -> dict:
    """``source.licence``: {"name", "url"}, or a bare name; "unknown" when the build did not record it."""
    lic = (manifest.get("source") or {}).get("licence")
    if isinstance(lic, dict) and lic.get("name"):
        return {"name": str(lic["name"]), "url": lic.get("url"), "note": lic.get("note") or lic.get("stated_by")}
    if isinstance(lic, str) and lic:
        return {"name": lic, "url": None, "note": None}
    return {"name": "unknown", "url": None, "note": "not recorded by this build"}


def sizes_of(manifest: dict) -> dict:
    """Bytes a browser downloads (the TF.js graphs, or the .tflite files on LiteRT.js) and
    the .tflite files the server loads."""
    litert = manifest.get("litert") or {}
    litert_paths = [part.get("path") for part in litert.values() if isinstance(part, dict)]
    return {"browser": {"tfjs_bytes": contract.browser_bytes(manifest),
                        "tflite_bytes": contract.files_bytes(manifest, litert_paths)},
            "server": {"tflite_bytes": contract.files_bytes(manifest, contract.server_artifacts(manifest))}}


def _server_parity_text(server: dict) -> str | None:
    runtime = runtime_name(server.get("runtime"))
    if server.get("same_file_as_reference"):
        return f"server ({runtime}) runs the reference files themselves"
    if isinstance(server.get("relative"), (int, float)):
        return f"server ({runtime}): max relative error {scientific(server['relative'])}"
    det = server.get("detections") or {}
    if isinstance(det.get("min_iou_same_class"), (int, float)):
        iou = math.floor(det["min_iou_same_class"] * 1e4) / 1e4  # rounded down: 0.99999 must not read 1.0
        return (f"server ({runtime}): {det.get('count')} of {det.get('reference_count')} reference detections, "
                f"IoU >= {iou:.4f}")
    return None


def parity_of(manifest: dict) -> dict | None:
    """The build's measured parity of the browser (TF.js) graph against the source framework."""
    parity = manifest.get("parity") or {}
    tfjs = parity.get("tfjs") or {}
    relative = tfjs.get("relative")
    if not isinstance(relative, (int, float)):
        return None
    reference = parity.get("reference") or {}
    runtime = runtime_name(reference.get("runtime"))
    photo = parity.get("photo")
    text = f"max relative error {scientific(relative)} vs {runtime}" + (f" on {photo}" if photo else "")
    parts = [{"part": name, "relative": p["relative"], "text": f"{name}: {scientific(p['relative'])}"}
             for name, p in (tfjs.get("models") or {}).items() if isinstance(p.get("relative"), (int, float))]
    return {"relative": relative, "reference": runtime, "reference_version": reference.get("version"),
            "reference_detail": reference.get("model") or reference.get("nms"),
            "photo": photo, "backend": tfjs.get("backend"), "passed": parity.get("passed"),
            "target_relative": parity.get("target_relative"), "text": text, "parts": parts,
            "server": _server_parity_text(parity.get("server") or {})}


def speed_of(manifest: dict) -> dict | None:
    """Native inference time measured at build (``speed``: the fastest of its runs), if the build measured it."""
    speed = manifest.get("speed") or {}
    if not isinstance(speed.get("ms"), (int, float)):
        return None
    threads = speed.get("threads")
    how = runtime_name(speed.get("runtime") or "litert") + (f", {threads} threads" if threads else "")
    what = f": {speed['what']}" if speed.get("what") else ""  # a model of several parts says which
    return {**speed, "text": f"{speed['ms']:.0f} ms native ({how}){what}"}


def agreement_of(manifest: dict) -> dict | None:
    """A smaller-input model's agreement with its full-size reference (``agreement``)."""
    agreement = manifest.get("agreement") or {}
    kept, total = agreement.get("kept"), agreement.get("reference_detections")
    if not (isinstance(kept, int) and isinstance(total, int)):
        return None
    reference = agreement.get("reference") or "the reference model"
    photos = ", ".join(agreement.get("photos") or [])
    rule = agreement.get("rule")
    return {**agreement, "text": f"keeps {kept}/{total} detections of {reference}" + (f" on {photos}" if photos else "")
            + (f" ({rule})" if rule else "")}


def input_size(manifest: dict) -> dict | None:
    shape = (manifest.get("input") or {}).get("shape")
    if isinstance(shape, list) and len(shape) == 4:
        return {"height": shape[1], "width": shape[2]}
    return None


def picker_text(manifest: dict, size, speed, agreement) -> str:
    """The picker's one line: id, input size, native speed, agreement (what is known)."""
    bits = [manifest["id"]]
    if size:
        bits.append(f"{size['width']} px" if size["width"] == size["height"] else f"{size['width']}x{size['height']} px")
    if speed:
        bits.append(f"{speed['ms']:.0f} ms native")
    if agreement:
        of = agreement.get("reference_size") or "the reference model"
        bits.append(f"keeps {agreement['kept']}/{agreement['reference_detections']} of {of}'s detections")
    return " · ".join(bits)


def finds_of(manifest: dict) -> dict:
    """What the model finds: its group (manifests.group), classes, a pose model's keypoints,
    and the release checkpoint and data an official build comes from."""
    labels = manifest.get("labels")
    kpt = manifest.get("kpt_shape")
    src = manifest.get("source") or {}
    return {"group": manifests.group(manifest), "group_label": manifests.GROUP_LABELS.get(manifests.group(manifest)),
            "classes": labels if isinstance(labels, list) else None,
            "keypoints": kpt[0] if isinstance(kpt, list) and kpt else None,
            "checkpoint": src.get("checkpoint"), "trained_on": src.get("trained_on")}


def card(manifest: dict) -> dict:
    """The model card of one installed model."""
    size, speed, agreement = input_size(manifest), speed_of(manifest), agreement_of(manifest)
    server = manifest.get("server") or {}
    return {
        "id": manifest["id"],
        "title": manifest.get("title") or manifest["id"],
        "task": manifest.get("task"),
        "summary": manifest.get("summary"),
        "finds": finds_of(manifest),
        "input": size,
        "source": source_of(manifest),
        "licence": licence_of(manifest),
        "quantization": {"browser": manifest.get("quantization", "none"),
                         "server": server.get("quantization") or manifest.get("quantization", "none")},
        "sizes": sizes_of(manifest),
        "parity": parity_of(manifest),
        "speed": speed,
        "agreement": agreement,
        "tools": {"converter_version": manifest.get("converter_version"), **(manifest.get("tools") or {})},
        "created": manifest.get("created"),
        "picker": picker_text(manifest, size, speed, agreement),
    }


def for_task(task: str | None) -> dict:
    """Cards of a task's installed models, by id (what a page embeds)."""
    return {m["id"]: card(m) for m in manifests.load_all() if task is None or m.get("task") == task}
