"""What the tests and the benches share, one module per concern: paths (where things are),
photos (photos and image makers), clips (y4m / WebM camera clips), models (installed models'
manifests), converter_cli (the CLI and its clean-error check), node (Node runs of the pages'
own modules), servers (werkzeug in a thread, gunicorn as in production) and browser (headless
Chromium). Test modules import from here, never from each other; bench/ too.

Fixtures live in tests/conftest.py."""
