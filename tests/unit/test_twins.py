"""The data the JS/Python twins share is one file, modelcontract/twins.json: the pages import it
through static/js/contract/twins.json (a link to it, so the static files serve it and the
offline copy holds it), the twins in Node export what it says, the Python twins read it, and
each contract module has its Python twin by name. The server backend's upload limit is the
server's own, rendered into the page."""
from __future__ import annotations

import json
import re

from modelcontract import answers, custom_classes, custom_gestures, gesture, hands, track
from modelcontract.twins import PATH, TWINS
from harness.node import js_url, run_node
from harness.paths import JS, ROOT

EXPORTS = """
const g = await import(%s);
const t = await import(%s);
const cg = await import(%s);
const cc = await import(%s);
const a = await import(%s);
const kind = ({distance, ...rest}) => rest;
process.stdout.write(JSON.stringify({
  gestures: g.GESTURES, thresholds: g.THRESHOLDS, shapes: g.SHAPES, track: t.DEFAULTS,
  custom_gestures: kind(cg.GESTURE_SETS.kind), custom_classes: kind(cc.CLASS_SETS.kind),
  answers: {max_samples: a.MAX_SAMPLES, scale_floor: a.SCALE_FLOOR},
}));
""" % tuple(js_url(JS / "contract" / f"{name}.js")
            for name in ("gesture", "track", "custom_gestures", "custom_classes", "answers"))


def test_the_pages_copy_is_the_contract_file():
    served = JS / "contract" / "twins.json"
    assert served.resolve() == PATH.resolve()
    assert json.loads(served.read_text(encoding="utf-8")) == TWINS


def test_the_js_twins_export_what_twins_json_says():
    got = run_node(EXPORTS, timeout=60)
    assert got["gestures"] == TWINS["gesture"]["gestures"]
    assert got["thresholds"] == TWINS["gesture"]["thresholds"]
    assert got["shapes"] == TWINS["gesture"]["shapes"]
    assert got["track"] == TWINS["track"]["defaults"]
    assert got["custom_gestures"] == TWINS["example_sets"]["custom_gestures"]
    assert got["custom_classes"] == TWINS["example_sets"]["custom_classes"]
    assert got["answers"] == {k: TWINS["answers"][k] for k in ("max_samples", "scale_floor")}


def test_the_python_twins_read_the_same():
    assert gesture.GESTURES == tuple(TWINS["gesture"]["gestures"]) and gesture.GESTURES[-1] == "none"
    assert gesture.THRESHOLDS == {k: tuple(v) for k, v in TWINS["gesture"]["thresholds"].items()}
    assert gesture.SHAPES == TWINS["gesture"]["shapes"]
    assert track.DEFAULTS == TWINS["track"]["defaults"]
    assert hands.HANDEDNESS == tuple(TWINS["hands"]["handedness"]) and hands.SWAP == TWINS["hands"]["person_handedness"]
    assert (answers.MAX_SAMPLES, answers.SCALE_FLOOR) == (TWINS["answers"]["max_samples"], TWINS["answers"]["scale_floor"])
    for sets, kind in ((custom_gestures.GESTURE_SETS, "custom_gestures"), (custom_classes.CLASS_SETS, "custom_classes")):
        want = TWINS["example_sets"][kind]
        assert (sets.format, sets.size, sets.limits, sets.max_distance, sets.k, sets.noun) == \
            (want["format"], want["size"], want["limits"], want["max_distance"], want["k"], want["noun"])


def test_every_contract_module_is_named_like_its_python_twin():
    modules = sorted(p.stem for p in (JS / "contract").glob("*.js"))
    assert modules and [m for m in modules if not (ROOT / "modelcontract" / f"{m}.py").is_file()] == []


def test_the_page_carries_the_servers_upload_limit(tmp_path):
    from server import create_app
    from server.settings import Settings

    app = create_app(settings=Settings.from_env({"DATARAILROAD_MODELS": str(tmp_path),
                                                 "DATARAILROAD_MAX_UPLOAD_BYTES": "1234"}))
    for path in ("/detect", "/classify", "/hands"):
        html = app.test_client().get(path).get_data(as_text=True)
        data = json.loads(re.search(r'<script type="application/json" id="page-data">(.*?)</script>', html, re.S)
                          .group(1))
        assert data["max_upload_bytes"] == 1234, path


def test_scores_js_ranks_as_scores_py():
    import numpy as np

    from modelcontract import scores

    cases = [[0.1, 0.5, 0.5, -2.0, 3.0, 0.5], [1.0] * 7, list(np.random.default_rng(3).normal(size=50))]
    got = run_node("const s = await import(%s); process.stdout.write(JSON.stringify(req.map("
                   "(v) => ({top: s.topK(v, 5), soft: s.softmax(v)}))));" % js_url(JS / "contract" / "scores.js"),
                   cases, timeout=60)
    for values, js in zip(cases, got):
        assert js["top"] == scores.top_k(values, 5)
        np.testing.assert_allclose(js["soft"], scores.softmax(values), rtol=1e-12)
