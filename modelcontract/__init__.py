"""The model contract shared by converters, server, tests and benches: what a model takes in
and how its outputs are read, written once in numpy (no web framework, no TensorFlow).

    geometry  the manifest's input contract: resize, letterbox, centre crop, normalise
    decode    every output format: "nms", "yolo-raw" (detectors), "probabilities", "logits"
    boxes     IoU and non-max suppression (as TF.js runs it)
    scores    softmax and top-k (as the pages rank)
    anchors   MediaPipe's SSD anchors
    hands     palm decoding and the palm -> hand crop of hand-pose-detection, handedness
    gesture   thumbs-up / thumbs-down rules (twin of static/js/gesture.js)
    limits    request limits and id rules the API, OpenAPI document and pages share
    paths     where installed models live by default

The browser mirrors parts of it in static/js (geometry.js, detector.js, gesture.js,
handpipeline.js); twin tests run both on the same inputs.
"""
