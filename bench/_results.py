"""What every bench writes besides what it prints: one JSON file, by default
bench/results/<bench>.json, with the figures it measured (and the ratios it printed), the
machine it ran on (CPUs, platform, load average, Chromium's version for the browser benches),
the date and the command's arguments. The docs cite these files for their figures.

    parser = argparse.ArgumentParser(...)
    add_out_option(parser, "server")
    ...
    write_results("server", args, {"latency": ..., "ratios": ...}, chromium=False)
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import subprocess
import sys
from pathlib import Path

from harness.browser import CHROMIUM

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
# Keys write_results sets itself; a bench's own figures go beside them.
META = ("bench", "date", "machine", "command", "args")


def add_out_option(parser: argparse.ArgumentParser, name: str) -> None:
    """--out PATH, by default bench/results/<name>.json."""
    parser.add_argument("--out", type=Path, default=RESULTS / f"{name}.json",
                        help=f"where the results go as JSON (default bench/results/{name}.json)")


def chromium_version(path: str = CHROMIUM) -> str | None:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return out.strip().splitlines()[0] if out.strip() else None


def machine(chromium: bool = False) -> dict:
    """CPUs, platform, Python, load average now; Chromium's version when asked."""
    cpu_model = None
    try:
        cpu_model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                          if line.startswith("model name")), None)
    except OSError:
        pass
    info = {"cpu_count": os.cpu_count(), "cpu_model": cpu_model, "platform": platform.platform(),
            "python": platform.python_version(), "load_average": [round(x, 2) for x in os.getloadavg()]}
    if chromium:
        info["chromium"] = chromium_version()
    return info


def plain(value):
    """As JSON: paths as strings, tuples as lists, floats to 4 decimals, NaN (nothing
    measured) as null."""
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, float):
        return round(value, 4) if math.isfinite(value) else None
    if hasattr(value, "item"):  # a numpy scalar
        return plain(value.item())
    return value


def write_results(name: str, args: argparse.Namespace, results: dict, chromium: bool = False) -> Path:
    """Write ``results`` (what bench ``name`` measured) with the machine, the date and the
    arguments to ``args.out``; says where."""
    clash = set(results) & set(META)
    assert not clash, f"results keys {clash} are write_results' own"
    out = Path(args.out)
    data = {"bench": name,
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "machine": machine(chromium),
            "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
            "args": {k: plain(v) for k, v in sorted(vars(args).items()) if k != "out"},
            **plain(results)}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    print(f"-> {out}")
    return out
