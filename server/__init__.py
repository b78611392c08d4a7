"""DataRailroad web app: ``create_app()`` builds a Flask app; nothing heavy at import."""
from __future__ import annotations

from flask import Flask

from . import config as _config
from .settings import Settings, load


def create_app(config: dict | None = None, settings: Settings | None = None) -> Flask:
    """The app on ``settings`` (default: this process's, ``server.settings.load()``).
    ``config``: more Flask config; its keys that mirror a setting (server/config.py MIRRORED:
    MODELS_DIR, MAX_CONTENT_LENGTH, ...) override that setting."""
    config = config or {}
    settings = _config.with_config(settings or load(), config)
    app = Flask(__name__, static_folder="../static", template_folder="../templates")
    app.config.update(config)
    app.config.update(_config.flask_config(settings))
    app.extensions[_config.EXTENSION] = settings

    from . import api, assets, certs, errors, health, manifests, offline, pages, security

    manifests.init_app(app)  # the one registry of installed models' manifests
    app.register_blueprint(pages.bp)
    app.register_blueprint(assets.models_bp)
    app.register_blueprint(assets.vendor_bp)
    app.register_blueprint(health.bp)
    app.register_blueprint(api.bp)
    app.register_blueprint(offline.bp)  # /sw.js and /app.webmanifest: the offline, installable app
    app.register_blueprint(certs.bp)  # /ca.crt under `make run HTTPS=1`
    errors.init_app(app)  # Problem and HTTP errors as JSON (HTML for a browsed page)
    security.register(app)
    return app
