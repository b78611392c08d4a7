"""The API's parameters are declared once (server/params.py): the OpenAPI document's
parameters and the parser's checks come from the same declaration. Runs without built models:
hand-written manifests and stand-in runners that record what the routes hand them."""
from __future__ import annotations

import json

import cv2
import numpy as np
import pytest

from modelcontract.decode import class_count, nms_defaults
from modelcontract.hands import VARIANTS
from server import create_app, openapi, params
from server.errors import Problem
from server.inference.detect import DetectRunner
from tests.fixtures.manifests import minimal

ROUTES = {"detect": params.DETECT, "classify": params.CLASSIFY, "hands": params.HANDS, "track": params.TRACK}
CALLS: list = []


class Recorder:
    """A runner without a model: the attributes the API's checks read, from the manifest as
    the real runners compute them; a call records its arguments."""

    def __init__(self, manifest, folder, settings=None):
        self.manifest, self.id = manifest, manifest["id"]
        self.format = manifest["outputs"]["format"]
        self.defaults = nms_defaults(manifest)
        self.num_classes = class_count(manifest)
        self.features_key = None
        self.variants = [v for v in VARIANTS if f"detector_{v}" in (manifest["server"].get("models") or {})]

    options = DetectRunner.options

    def __call__(self, image, *args, **kwargs):
        CALLS.append((args, kwargs))
        return {"model": self.id, "image": {"width": image.shape[1], "height": image.shape[0]}, "timing_ms": {}}


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    folder = tmp_path_factory.mktemp("models")
    one = "tfjs/model.json"
    pair = {f"{part}_{v}": one for part in ("detector", "landmark") for v in VARIANTS}
    for fields in (dict(id="det", task="detect", outputs={"format": "nms"}, nms={"iou": 0.45}),
                   dict(id="cls", task="classify", outputs={"format": "probabilities"}, labels=list("abcdefg")),
                   dict(id="hand", task="handpose", outputs={"format": "mediapipe-hands"}, server={"models": pair})):
        (folder / fields["id"] / "tfjs").mkdir(parents=True)
        (folder / fields["id"] / one).write_text("{}")
        manifest = minimal(**{"server": {"model": one}, **fields})
        (folder / fields["id"] / "manifest.json").write_text(json.dumps(manifest))
    app = create_app({"MODELS_DIR": folder, "TESTING": True,
                      "INFERENCE_RUNNERS": {"detect": Recorder, "classify": Recorder, "handpose": Recorder}})
    return app.test_client()


@pytest.fixture(scope="module")
def documented(client):
    doc = client.get("/api/v1/openapi.json").get_json()
    return {route: doc["paths"][f"/api/v1/{route}"]["post"]["parameters"] for route in ROUTES}


def post(client, route, name, value):
    body = b"not a video" if route == "track" else cv2.imencode(".png", np.zeros((8, 8, 3), np.uint8))[1].tobytes()
    CALLS.clear()
    return client.post(f"/api/v1/{route}", query_string={name: value}, data=body,
                       content_type="video/mp4" if route == "track" else "image/png")


def test_document_lists_the_declared_parameters(documented):
    for route, declared in ROUTES.items():
        assert [(p["name"], p["description"]) for p in documented[route]] == [(p.name, p.doc) for p in declared]
    bounds = {"nms_iou": 0.45, "num_classes": 7, "variants": VARIANTS}
    detect = {p["name"]: p["schema"] for p in documented["detect"]}
    assert detect["model"] == {"type": "string", "enum": ["det"]}  # the installed detectors
    assert detect["iou"] == {"type": "number", "enum": [0.45]}  # its in-graph NMS's IoU
    assert detect["score"] == params.DETECT[1].schema(bounds) == {"type": "number", "minimum": 0, "maximum": 1}
    assert documented["classify"][1]["schema"] == {"type": "integer", "minimum": 1, "maximum": 7}
    assert documented["hands"][-1]["schema"] == {"type": "string", "enum": list(VARIANTS)}


@pytest.mark.parametrize("route", ROUTES)
def test_a_bad_value_is_refused_with_the_documented_range(client, documented, route):
    checked = 0
    for parameter in documented[route]:
        name, schema = parameter["name"], parameter["schema"]
        if "minimum" in schema:
            low, high = schema["minimum"], schema["maximum"]
            word = "a number" if schema["type"] == "number" else "an integer"
            quoted = f"{name} must be {word} from {low:g} to {high:g}, got "
            outside, inside = [low - 1, high + 1], [low, high]
        elif name == "variant":
            quoted = f"{name} must be one of {', '.join(schema['enum'])}, got "
            outside, inside = ["huge"], schema["enum"]
        elif "pattern" in schema and name != "model":
            quoted = f"{name} must be "
            outside, inside = ["x"], []
        else:
            continue
        checked += 1
        for value in outside:
            response = post(client, route, name, value)
            assert response.status_code == 400, (name, value)
            error = response.get_json()["error"]
            assert error["code"] == "bad_parameter" and error["message"].startswith(quoted), error
        for value in inside:
            response = post(client, route, name, value)
            if route == "track":  # a parameter the document calls valid: the body's turn (not a video)
                assert response.get_json()["error"]["code"] != "bad_parameter", (name, value)
            else:
                assert response.status_code == 200, (name, value, response.get_json())
                arg = next(p.arg or p.name for p in ROUTES[route] if p.name == name)
                args, kwargs = CALLS[0]
                assert (kwargs[arg] if arg in kwargs else getattr(args[0], name)) == value, (name, CALLS)
    assert checked


def test_absent_parameters_are_the_declared_default_or_the_model_s(client):
    assert post(client, "classify", "other", "1").status_code == 200
    assert CALLS == [((), {"k": None, "custom": None})]
    assert params.VIDEO[1].default == 1 and openapi.document()["paths"]["/api/v1/track"]["post"]["parameters"][-1][
        "schema"]["default"] == 1


def test_an_iou_the_model_does_not_run_is_the_runner_s_400(client):
    error = post(client, "detect", "iou", "0.6").get_json()["error"]
    assert error == {"code": "bad_parameter",
                     "message": "model det runs NMS inside its graph at IoU 0.45; iou cannot be changed for it (omit it)"}


def test_cluster_replica_answers_any_problem_as_unavailable(tmp_path):
    """The model deployment catches the registry's refusals as Problems (no other base)."""
    pytest.importorskip("ray.serve")
    from server.cluster.app import ModelServer
    from server.cluster.remote import Unavailable

    replica = ModelServer.func_or_class("classify", str(tmp_path))
    with pytest.raises(Problem):
        replica.registry.get("classify", "nope")
    answer = replica.describe("nope")
    assert isinstance(answer, Unavailable) and "'nope' is not installed" in answer.message
