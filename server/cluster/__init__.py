"""The app on a Ray Serve cluster (docs/scaling.md).

    server/cluster/app.py     the Serve application: an HTTP ingress running the Flask app
                              (pages, static, /models, /api/v1) and one model deployment per task
    server/cluster/remote.py  the runners the Flask API gets there: checks local, inference remote
    server/cluster/serve.yaml replicas, batching and threads per model deployment
    python -m server.cluster up|down   a local cluster for `make cluster` / `make cluster-stop`

Nothing here is imported by the app itself: `make run` stays Flask + gunicorn without Ray.
"""
