"""A local Ray cluster on this machine (``make cluster`` / ``make cluster-stop``, the tests,
bench/cluster.py): a head plus worker nodes, each its own raylet with its own resources,
ports and temp dir, then the Serve application from serve.yaml.

Every process the cluster runs carries DATARAILROAD_CLUSTER=<its state dir> in its
environment (the nodes pass their environment on to their workers), so ``down()`` ends
exactly those processes and never another Ray on the same machine.

Ports (all on 127.0.0.1): GCS ``ray_port``, dashboard ``ray_port + 1`` (Serve's REST deploy
API and Ray's state API), node i takes ``node_ports + 100 * i`` .. ``+ 99``; of node 0's,
``+ 7`` and ``+ 8`` are HAProxy's stats and metrics and ``+ 80`` .. ``+ 99`` the ingress
replicas' own HTTP and gRPC servers (serve.env's direct ingress). Each replica's
inter-deployment gRPC server takes a free port of the kernel's choosing.
"""
from __future__ import annotations

import copy
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
CONFIG = Path(__file__).with_name("serve.yaml")
SERVE_ENV = Path(__file__).with_name("serve.env")
STATE_ROOT = ROOT / ".cluster"
APP = "datarailroad"
# An internal marker of this cluster's processes (see above), not a setting: it is not in
# server/settings.py and nothing configures it.
MARKER = "DATARAILROAD_CLUSTER"


@dataclass
class LocalCluster:
    nodes: int = 2
    http_port: int = 8300
    ray_port: int = 6380
    node_ports: int = 10000
    cpus_per_node: int | None = None  # logical CPUs per node (default: serve.yaml's minimum replicas fit)
    object_store_mb: int = 300      # per node: requests carry decoded images only
    models_dir: str | None = None   # DATARAILROAD_MODELS of every node (default: ./models)
    # More environment for every node: DATARAILROAD_* settings reach the replicas this way.
    env: dict = field(default_factory=dict)
    started: list[str] = field(default_factory=list)

    @property
    def state_dir(self) -> Path:
        return STATE_ROOT / str(self.ray_port)

    @property
    def dashboard(self) -> str:
        return f"http://127.0.0.1:{self.ray_port + 1}"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}/"

    def temp_dir(self, i: int) -> str:
        # Short and outside the checkout: Ray's socket paths must stay under 107 characters.
        return f"/tmp/datarailroad-ray-{self.ray_port}-n{i}"

    @property
    def haproxy_dir(self) -> str:
        # HAProxy's config, sockets and state. Serve adds a 57-character folder under it, and
        # HAProxy takes socket paths of at most 97 characters.
        return f"/tmp/drr-haproxy-{self.ray_port}"

    # ------------------------------------------------------------------------ nodes

    def cpus(self) -> int:
        """Logical CPUs per node: what serve.yaml's minimum replica counts reserve, spread over
        the nodes (at least 2 each). These nodes share this machine's cores anyway."""
        if self.cpus_per_node:
            return self.cpus_per_node
        return max(2, math.ceil(reserved_cpus(yaml.safe_load(CONFIG.read_text())) / self.nodes))

    def node_command(self, i: int) -> list[str]:
        base = self.node_ports + 100 * i
        cmd = [str(Path(sys.executable).with_name("ray")), "start", "--node-ip-address=127.0.0.1",
               f"--num-cpus={self.cpus()}", f"--object-store-memory={self.object_store_mb * 1024 * 1024}",
               f"--temp-dir={self.temp_dir(i)}", f"--node-manager-port={base}", f"--object-manager-port={base + 1}",
               f"--dashboard-agent-listen-port={base + 2}", f"--dashboard-agent-grpc-port={base + 3}",
               f"--runtime-env-agent-port={base + 4}", f"--metrics-export-port={base + 5}",
               f"--min-worker-port={base + 10}", f"--max-worker-port={base + (79 if i == 0 else 99)}",
               "--disable-usage-stats"]
        if i == 0:
            return cmd + ["--head", f"--port={self.ray_port}", f"--ray-client-server-port={base + 6}",
                          "--include-dashboard=true", "--dashboard-host=127.0.0.1",
                          f"--dashboard-port={self.ray_port + 1}"]
        return cmd + [f"--address=127.0.0.1:{self.ray_port}"]

    def node_env(self) -> dict:
        """serve.env, then what keeps this cluster apart from others on the machine (HAProxy's
        files and ports, the ingress ports), then ``env``."""
        env = {**os.environ, **serve_env()}
        base = self.node_ports
        env.update({
            "RAY_SERVE_HAPROXY_CONFIG_FILE_LOC": f"{self.haproxy_dir}/haproxy.cfg",
            "RAY_SERVE_HAPROXY_SOCKET_PATH": f"{self.haproxy_dir}/admin.sock",
            "RAY_SERVE_HAPROXY_SERVER_STATE_BASE": self.haproxy_dir,
            "RAY_SERVE_HAPROXY_SERVER_STATE_FILE": f"{self.haproxy_dir}/server-state",
            "RAY_SERVE_HAPROXY_METRICS_SOCKET_PATH": f"{self.haproxy_dir}/metrics.sock",
            "RAY_SERVE_HAPROXY_STATS_PORT": str(base + 7),
            "RAY_SERVE_HAPROXY_METRICS_PORT": str(base + 8),
            "RAY_SERVE_DIRECT_INGRESS_MIN_HTTP_PORT": str(base + 80),
            "RAY_SERVE_DIRECT_INGRESS_MAX_HTTP_PORT": str(base + 89),
            "RAY_SERVE_DIRECT_INGRESS_MIN_GRPC_PORT": str(base + 90),
            "RAY_SERVE_DIRECT_INGRESS_MAX_GRPC_PORT": str(base + 99),
        })
        env.update(self.env)
        env[MARKER] = str(self.state_dir)
        env["RAY_USAGE_STATS_ENABLED"] = "0"
        if self.models_dir:
            env["DATARAILROAD_MODELS"] = str(Path(self.models_dir).resolve())
        return env

    def start_nodes(self) -> None:
        if cluster_processes(self.state_dir):
            raise RuntimeError(f"a cluster is already running on Ray port {self.ray_port}: "
                               f"`make cluster-stop RAY_PORT={self.ray_port}` first")
        self.state_dir.mkdir(parents=True, exist_ok=True)
        Path(self.haproxy_dir).mkdir(parents=True, exist_ok=True)
        self.started.append(self.haproxy_dir)
        self.save()
        env = self.node_env()
        for i in range(self.nodes):
            log = (self.state_dir / f"node{i}.log").open("w")
            subprocess.run(self.node_command(i), env=env, stdout=log, stderr=subprocess.STDOUT, check=True,
                           timeout=180)
            self.started.append(self.temp_dir(i))
            self.save()

    def save(self) -> None:
        (self.state_dir / "cluster.json").write_text(json.dumps(asdict(self), indent=1))

    # ------------------------------------------------------------------------ the app

    def serve_config(self, deployments: dict | None = None) -> dict:
        """serve.yaml for this machine: the proxy on the head only (the nodes share one
        address), this HTTP port; ``deployments`` overrides fields per deployment name
        (``num_replicas`` replaces autoscaling; ``user_config`` merges)."""
        config = yaml.safe_load(CONFIG.read_text())
        config["proxy_location"] = "HeadOnly"
        config["http_options"].update(host="127.0.0.1", port=self.http_port)
        app = next(a for a in config["applications"] if a["name"] == APP)
        for dep in app["deployments"]:
            changes = copy.deepcopy((deployments or {}).get(dep["name"], {}))
            if "num_replicas" in changes:
                dep.pop("autoscaling_config", None)
            if "user_config" in changes:
                dep["user_config"] = {**dep.get("user_config", {}), **changes.pop("user_config")}
            dep.update(changes)
        return config

    def deploy(self, deployments: dict | None = None, timeout: float = 240) -> None:
        """Apply the config through the dashboard's REST API (what `serve deploy` does) and
        wait until the application runs and /healthz answers."""
        config = self.serve_config(deployments)
        (self.state_dir / "serve.deployed.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
        request = urllib.request.Request(f"{self.dashboard}/api/serve/applications/", method="PUT",
                                         data=json.dumps(config).encode(),
                                         headers={"Content-Type": "application/json"})
        deadline = time.monotonic() + timeout
        # The dashboard takes a few seconds to come up after `ray start --head`, and on a busy
        # machine a call can outlast its timeout: the PUT is idempotent, so it is sent again.
        while True:
            try:
                urllib.request.urlopen(request, timeout=30).read()
                break
            except (urllib.error.URLError, ConnectionError, TimeoutError) as exc:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"Serve's deploy API did not answer: {exc}") from None
                time.sleep(1)
        self.wait_running(deadline)

    def app_status(self) -> dict:
        with urllib.request.urlopen(f"{self.dashboard}/api/serve/applications/", timeout=10) as r:
            return json.load(r).get("applications", {}).get(APP, {})

    def wait_running(self, deadline: float) -> None:
        status = {}
        while time.monotonic() < deadline:
            try:
                status = self.app_status()
                if status.get("status") == "RUNNING" and all(
                        d.get("status") == "HEALTHY" for d in status.get("deployments", {}).values()):
                    with urllib.request.urlopen(f"{self.url}healthz", timeout=5) as r:
                        if r.status == 200:
                            return
                if status.get("status") == "DEPLOY_FAILED":
                    break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(1)
        raise RuntimeError(f"the application did not come up: {json.dumps(status)[:2000]}")

    def up(self, deployments: dict | None = None) -> "LocalCluster":
        try:
            self.start_nodes()
            self.deploy(deployments)
        except BaseException:
            down(self.ray_port)
            raise
        return self


def serve_env(path: Path = SERVE_ENV) -> dict:
    """serve.env's KEY=VALUE lines."""
    lines = (line.strip() for line in path.read_text().splitlines())
    return dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))


def reserved_cpus(config: dict) -> float:
    """CPUs the deployments of a Serve config reserve at their minimum replica counts."""
    total = 0.0
    for app in config["applications"]:
        for dep in app.get("deployments", []):
            replicas = dep.get("autoscaling_config", {}).get("min_replicas", dep.get("num_replicas", 1))
            total += replicas * dep.get("ray_actor_options", {}).get("num_cpus", 1)
    return total


def cluster_processes(state_dir: Path) -> list[int]:
    """Pids of the processes of this cluster (and nobody else's): those carrying its marker in
    their environment, and those holding a file in its temp dirs. The second catches Ray's
    agents, whose process title overwrites their environment block and which can outlive
    their raylet."""
    marker = f"{MARKER}={state_dir}".encode()
    folders = tuple(f"{folder}/" for folder in started_dirs(state_dir))
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if marker in (entry / "environ").read_bytes().split(b"\0") or holds_file_in(entry, folders):
                pids.append(int(entry.name))
        except OSError:
            pass
    return pids


def holds_file_in(process: Path, folders: tuple[str, ...]) -> bool:
    if not folders:
        return False
    for fd in (process / "fd").iterdir():
        try:
            if os.readlink(fd).startswith(folders):
                return True
        except OSError:
            pass
    return False


def started_dirs(state_dir: Path) -> list[str]:
    try:
        return json.loads((state_dir / "cluster.json").read_text()).get("started", [])
    except (OSError, ValueError):
        return []


def down(ray_port: int = 6380, grace: float = 10) -> int:
    """Stop every process of the cluster on ``ray_port`` (SIGTERM, then SIGKILL) and remove
    its temp dirs. Returns how many processes there were."""
    state_dir = STATE_ROOT / str(ray_port)
    pids = cluster_processes(state_dir)
    found = len(pids)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and cluster_processes(state_dir):
            time.sleep(0.2)
        pids = cluster_processes(state_dir)
        if not pids:
            break
    for temp in started_dirs(state_dir):
        shutil.rmtree(temp, ignore_errors=True)
    return found
