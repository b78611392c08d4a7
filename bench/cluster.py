"""The app on a local Ray Serve cluster vs gunicorn, side by side in one run (YOLOv5n,
POST /api/v1/detect with bus.jpg as a raw JPEG body; every interpreter runs 1 thread):

1. latency at 1 client: gunicorn (`make run`'s server) vs Serve (HAProxy -> Flask ingress
   -> detect replica), requests interleaved;
2. throughput at 8 clients: 1 detect replica vs 2 (1 thread each, one per node);
3. throughput at 8 clients, 2 replicas, with @serve.batch (max_batch_size 4) vs without (1);
4. (--soak S) S seconds at 16 clients over detect / classify / hands: status codes (0 5xx
   expected) and the RSS of every model replica, sampled every 10 s.

Sections 2 and 3 alternate their two configurations over --rounds rounds (a redeploy between),
so load from elsewhere on the machine hits both alike. On 2 cores the ceiling of 2 vs 1
replica is about 2x (docs/scaling.md: what a cluster of machines gives).
Each throughput line also gives the CPU time the processes spent per request (/proc, by
role: model replicas, ingress, HAProxy, Serve's proxy actor (it runs HAProxy), Ray's own
processes; gunicorn's workers), which other load on the machine does not change the way it
changes req/s.

usage: .venv/bin/python -m bench.cluster [--models DIR] [--seconds 12] [--rounds 2] [--runs 30] [--soak 60]
       [--out bench/results/cluster.json]
Ports: HTTP 8433 (Serve) and 8434 (gunicorn), Ray 6394-6395 and 10600-10799.
"""
from __future__ import annotations

import argparse
import http.client
import os
import statistics
import sys
import threading
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

from bench._results import add_out_option, write_results
from modelcontract.paths import models_dir
from server.cluster.local import LocalCluster, cluster_processes, down
from harness.photos import photo_bytes
from harness.servers import ProductionServer, proc_stat

SERVE_PORT, GUNICORN_PORT, RAY_PORT, NODE_PORTS = 8433, 8434, 6394, 10600
JPEG = {"Content-Type": "image/jpeg"}


def post(conn: http.client.HTTPConnection, path: str, body: bytes) -> int:
    conn.request("POST", path, body=body, headers=JPEG)
    response = conn.getresponse()
    response.read()
    return response.status


def latency_ms(port: int, body: bytes) -> float:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    t0 = time.perf_counter()
    status = post(conn, "/api/v1/detect", body)
    elapsed = (time.perf_counter() - t0) * 1e3
    conn.close()
    if status != 200:
        raise RuntimeError(f"port {port}: HTTP {status}")
    return elapsed


def load(port: int, clients: int, seconds: float, requests: list[tuple[str, bytes]]) -> tuple[float, Counter]:
    """``clients`` threads, each on its own keep-alive connection, cycling through
    ``requests`` for ``seconds``: (completed requests per second, status counts)."""
    statuses: Counter = Counter()
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def client(offset: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        i = offset
        while time.monotonic() < stop:
            path, body = requests[i % len(requests)]
            try:
                status = post(conn, path, body)
            except (OSError, http.client.HTTPException):
                status = "connection error"
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            with lock:
                statuses[status] += 1
            i += 1
        conn.close()

    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return statuses[200] / (time.monotonic() - started), statuses


def replica_rss_mb(cluster: LocalCluster) -> dict[str, float]:
    """{deployment#replica: RSS MB} of the live model replicas (Ray's state API for the pids)."""
    from ray.util.state import list_actors

    rss = {}
    for actor in list_actors(address=cluster.dashboard, filters=[("state", "=", "ALIVE")],
                             raise_on_missing_output=False):
        if actor.class_name.startswith("ServeReplica:") and not actor.class_name.endswith(":Ingress"):
            try:
                status = Path(f"/proc/{actor.pid}/status").read_text()
            except OSError:
                continue
            kb = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:"))
            rss[f"{actor.class_name.split(':')[-1]}#{actor.name.rsplit('#', 1)[-1]}"] = kb / 1024
    return rss


def detect_options(replicas: int, batch: int) -> dict:
    return {"detect": {"num_replicas": replicas, "user_config": {"threads": 1, "max_batch_size": batch}}}


def process_role(pid: int) -> str | None:
    try:
        title = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
    except OSError:
        return None
    if title.startswith("ray::ServeReplica:"):
        return "ingress" if title.endswith(":Ingress") else "model replicas"
    if title.endswith("/haproxy"):
        return "HAProxy"
    return "proxy actor" if title.startswith("ray::ProxyActor") else "Ray daemons"


def cpu_seconds(pids: list[int], role=process_role) -> Counter:
    """utime + stime of ``pids`` by role, from /proc/<pid>/stat."""
    tick, total = os.sysconf("SC_CLK_TCK"), Counter()
    for pid in pids:
        try:
            fields = proc_stat(pid)
        except OSError:
            continue
        name = role(pid)
        if name:
            total[name] += (int(fields[11]) + int(fields[12])) / tick
    return total


def group_pids(pgid: int) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and os.getpgid(int(entry.name)) == pgid:
                pids.append(int(entry.name))
        except OSError:
            pass
    return pids


def measured_load(port: int, seconds: float, body: bytes, pids, role=process_role):
    """8-client load on /api/v1/detect: (req/s, statuses, {role: CPU ms per request})."""
    pids = pids()
    before = cpu_seconds(pids, role)
    rate, statuses = load(port, 8, seconds, [("/api/v1/detect", body)])
    used = cpu_seconds(pids, role) - before
    return rate, statuses, {k: 1e3 * v / max(1, statuses[200]) for k, v in used.items()}


def alternate(cluster: LocalCluster, configs: dict, rounds: int, seconds: float, body: bytes):
    """({label: [req/s per round]}, {label: {role: CPU ms per request}}): the configurations
    take turns, each warmed up first."""
    rates: dict[str, list[float]] = {label: [] for label in configs}
    cpu: dict[str, Counter] = {label: Counter() for label in configs}
    for _ in range(rounds):
        for label, options in configs.items():
            cluster.deploy(options)
            load(cluster.http_port, 8, 3, [("/api/v1/detect", body)])  # warm-up
            rate, statuses, ms = measured_load(cluster.http_port, seconds, body,
                                               lambda: cluster_processes(cluster.state_dir))
            if set(statuses) != {200}:
                print(f"  ! {label}: {dict(statuses)}")
            rates[label].append(rate)
            cpu[label].update({k: v / rounds for k, v in ms.items()})
    return rates, cpu


def cpu_line(ms: dict) -> str:
    return f"CPU ms/request {sum(ms.values()):5.0f} = " + " + ".join(f"{k} {v:.0f}" for k, v in sorted(ms.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=str(models_dir()))
    parser.add_argument("--seconds", type=float, default=12, help="per throughput measurement")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--runs", type=int, default=30, help="latency requests per server")
    parser.add_argument("--soak", type=float, default=60, help="seconds of the 16-client load; 0 skips it")
    parser.add_argument("--ray-env", action="append", default=[], metavar="NAME=VALUE",
                        help="more environment for the Ray nodes (Ray system settings: RAY_...)")
    add_out_option(parser, "cluster")
    args = parser.parse_args()
    report: dict = {}
    models = Path(args.models).resolve()
    if not (models / "yolov5n" / "manifest.json").is_file():
        sys.exit(f"no yolov5n in {models}: `make models` (or --models DIR)")
    bus = photo_bytes("bus.jpg")

    down(RAY_PORT)
    # `make run`'s server: a worker per core, one model thread each.
    gunicorn = ProductionServer(models, os.cpu_count(), port=GUNICORN_PORT, env={"DATARAILROAD_INFER_THREADS": "1"})
    cluster = LocalCluster(nodes=2, http_port=SERVE_PORT, ray_port=RAY_PORT, node_ports=NODE_PORTS,
                           models_dir=str(models),
                           # Ray runs workers at niceness 15 (its daemons stay responsive); gunicorn's
                           # workers run at 0. On a machine shared with other work that alone would
                           # decide the comparison, so the replicas run at 0 here too.
                           env={"RAY_worker_niceness": "0", **dict(e.split("=", 1) for e in args.ray_env)})
    try:
        print(f"2-node local Ray Serve cluster vs gunicorn ({os.cpu_count()} cores), YOLOv5n, bus.jpg")
        cluster.up(detect_options(2, 4))

        # 1. latency, interleaved
        for port in (GUNICORN_PORT, SERVE_PORT):
            for _ in range(3):
                latency_ms(port, bus)
        samples = {GUNICORN_PORT: [], SERVE_PORT: []}
        for _ in range(args.runs):
            for port in samples:
                samples[port].append(latency_ms(port, bus))
        g, s = (statistics.median(samples[p]) for p in (GUNICORN_PORT, SERVE_PORT))
        print(f"\n1. latency, 1 client ({args.runs} requests each, median / p90 ms)")
        for name, port in (("gunicorn", GUNICORN_PORT), ("Serve", SERVE_PORT)):
            q = statistics.quantiles(samples[port], n=10)
            print(f"   {name:<10} {statistics.median(samples[port]):7.1f} / {q[-1]:7.1f}")
        print(f"   Serve / gunicorn: {s / g:.2f}x the median latency ({s - g:+.1f} ms)")
        report["latency_ms"] = {name: {"median": statistics.median(samples[port]),
                                       "p90": statistics.quantiles(samples[port], n=10)[-1]}
                                for name, port in (("gunicorn", GUNICORN_PORT), ("serve", SERVE_PORT))}
        report["ratios"] = {"serve_over_gunicorn_latency": s / g}
        gunicorn_rate, _, gunicorn_cpu = measured_load(GUNICORN_PORT, args.seconds, bus,
                                                       lambda: group_pids(gunicorn.proc.pid), lambda pid: "gunicorn")
        gunicorn.stop()

        # 2. replicas, 3. batching
        replicas, replicas_cpu = alternate(cluster, {"1 replica": detect_options(1, 4), "2 replicas": detect_options(2, 4)},
                             args.rounds, args.seconds, bus)
        batching, batching_cpu = alternate(cluster, {"batch 4": detect_options(2, 4), "no batching": detect_options(2, 1)},
                             args.rounds, args.seconds, bus)
        print(f"\n2. throughput, 8 clients, 1 thread per replica (req/s per round; {args.seconds:g} s each)")
        for label, rates in replicas.items():
            print(f"   {label:<12} {statistics.mean(rates):6.2f}   {['%.2f' % r for r in rates]}   "
                  f"{cpu_line(replicas_cpu[label])}")
        print(f"   2 / 1 replica: {statistics.mean(replicas['2 replicas']) / statistics.mean(replicas['1 replica']):.2f}x"
              f"   (gunicorn, 2 workers x 1 thread: {gunicorn_rate:.2f} req/s, {cpu_line(gunicorn_cpu)})")
        print("\n3. throughput, 8 clients, 2 replicas: @serve.batch(max_batch_size=4) vs none")
        for label, rates in batching.items():
            print(f"   {label:<12} {statistics.mean(rates):6.2f}   {['%.2f' % r for r in rates]}   "
                  f"{cpu_line(batching_cpu[label])}")
        print(f"   batch / none: {statistics.mean(batching['batch 4']) / statistics.mean(batching['no batching']):.2f}x")
        report["throughput_rps"] = {"gunicorn": gunicorn_rate, **replicas, **batching}
        report["cpu_ms_per_request"] = {"gunicorn": dict(gunicorn_cpu), **{k: dict(v) for k, v in replicas_cpu.items()},
                                        **{k: dict(v) for k, v in batching_cpu.items()}}
        report["ratios"]["2_replicas_over_1"] = (statistics.mean(replicas["2 replicas"])
                                                 / statistics.mean(replicas["1 replica"]))
        report["ratios"]["batch_over_none"] = (statistics.mean(batching["batch 4"])
                                               / statistics.mean(batching["no batching"]))

        # 4. soak
        if args.soak > 0:
            # serve.yaml's settings at its minimum replica counts, fixed: RSS per replica stays comparable
            cluster.deploy({name: {"num_replicas": n} for name, n in (("detect", 2), ("classify", 1),
                                                                     ("handpose", 1))})
            mixed = [("/api/v1/detect", bus), ("/api/v1/classify", bus), ("/api/v1/hands", photo_bytes("zidane.jpg"))]
            load(SERVE_PORT, 16, 20, mixed)  # warm-up: interpreters' arenas and caches fill first
            samples, statuses, done = [(0.0, replica_rss_mb(cluster))], Counter(), threading.Event()

            def sample():
                while not done.wait(10):
                    samples.append((time.monotonic() - t0, replica_rss_mb(cluster)))

            t0 = time.monotonic()
            sampler = threading.Thread(target=sample)
            sampler.start()
            rate, statuses = load(SERVE_PORT, 16, args.soak, mixed)
            done.set()
            sampler.join()
            samples.append((time.monotonic() - t0, replica_rss_mb(cluster)))
            errors = sum(n for status, n in statuses.items() if not isinstance(status, int) or status >= 500)
            print(f"\n4. {args.soak:g} s at 16 clients, detect/classify/hands: {rate:.2f} req/s, statuses "
                  f"{dict(statuses)}, 5xx or connection errors: {errors}")
            names = sorted(set().union(*(s for _, s in samples)))
            print("   RSS MB per model replica at " + " ".join(f"{t:5.0f}s" for t, _ in samples))
            for name in names:
                row = " ".join(f"{s[name]:6.0f}" if name in s else "     -" for _, s in samples)
                first = next(s[name] for _, s in samples if name in s)
                last = next(s[name] for _, s in reversed(samples) if name in s)
                mid = next(s[name] for t, s in samples if name in s and t >= args.soak / 2)
                print(f"   {name:<22} {row}   (start -> end {last - first:+.0f} MB, second half {last - mid:+.0f} MB)")
            report["soak"] = {"seconds": args.soak, "clients": 16, "rps": rate,
                              "statuses": {str(k): n for k, n in statuses.items()}, "errors": errors,
                              "rss_mb": [{"t": t, **rss} for t, rss in samples]}
        write_results("cluster", args, report)
    finally:
        gunicorn.stop()
        down(RAY_PORT)


if __name__ == "__main__":
    main()
