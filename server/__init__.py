"""DataRailroad web app: ``create_app()`` builds a Flask app; nothing heavy at import."""
from __future__ import annotations

from flask import Flask

from . import config as _config


def create_app(config: dict | None = None) -> Flask:
    app = Flask(__name__, static_folder="../static", template_folder="../templates")
    app.config.update(_config.from_env())
    if config:
        app.config.update(config)

    from . import api, assets, certs, errors, health, manifests, offline, pages, security

    manifests.init_app(app)  # the one registry of installed models' manifests
    app.register_blueprint(pages.bp)
    app.register_blueprint(assets.models_bp)
    app.register_blueprint(assets.vendor_bp)
    app.register_blueprint(health.bp)
    app.register_blueprint(api.bp)
    app.register_blueprint(offline.bp)  # /sw.js and /app.webmanifest: the offline, installable app
    app.register_blueprint(certs.bp)  # /ca.crt under `make run HTTPS=1`
    errors.register(app)
    security.register(app)
    return app
