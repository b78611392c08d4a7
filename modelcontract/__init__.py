"""The model contract shared by converters, server, tests and benches: what a model takes in
and how its outputs are read, written once in numpy (no web framework, no TensorFlow).

One module per part of the contract (input geometry, output decoding, the answers' rules, the
manifest, model limits and id rules, where models live); each module's docstring says what it
is for. Server settings and HTTP limits are not part of it: they are the server's
(server/settings.py, server/limits.py).

The browser mirrors parts of it in static/js/contract/, one module named like each twin here
(geometry.py <-> geometry.js, decode.py <-> decode.js, ...); twin tests run both on the same inputs.
"""
