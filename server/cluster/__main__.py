"""python -m server.cluster up|down: the local cluster of `make cluster` / `make cluster-stop`."""
from __future__ import annotations

import argparse

from .local import LocalCluster, down


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m server.cluster")
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start a head + NODES-1 workers here and deploy the app")
    up.add_argument("--nodes", type=int, default=2)
    up.add_argument("--port", type=int, default=8300, help="HTTP port of the app")
    up.add_argument("--ray-port", type=int, default=6380, help="GCS port (dashboard: +1)")
    up.add_argument("--node-ports", type=int, default=10000, help="node i uses this + 100*i .. +99")
    up.add_argument("--cpus-per-node", type=int, help="logical CPUs per node (default: serve.yaml's minimum fits)")
    up.add_argument("--object-store-mb", type=int, default=300)
    up.add_argument("--models", help="models folder of every node (default: DATARAILROAD_MODELS or ./models)")
    stop = sub.add_parser("down", help="stop the cluster on --ray-port")
    stop.add_argument("--ray-port", type=int, default=6380)
    args = parser.parse_args(argv)
    if args.command == "up":
        if args.nodes < 1:
            parser.error("--nodes must be at least 1")
        cluster = LocalCluster(nodes=args.nodes, http_port=args.port, ray_port=args.ray_port,
                               node_ports=args.node_ports, cpus_per_node=args.cpus_per_node,
                               object_store_mb=args.object_store_mb, models_dir=args.models).up()
        print(f"DataRailroad on a {cluster.nodes}-node Ray Serve cluster: {cluster.url}  "
              f"(stop: make cluster-stop RAY_PORT={cluster.ray_port})")
    else:
        print(f"stopped {down(args.ray_port)} processes of the cluster on Ray port {args.ray_port}")


if __name__ == "__main__":
    main()
