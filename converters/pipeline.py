"""What every conversion shares: temp folder, idempotence, progress, manifest, atomic install."""
from __future__ import annotations

import contextlib
import importlib
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from modelcontract import limits
from modelcontract import manifest as contract
from modelcontract import paths
from modelcontract.paths import models_dir

from . import FAMILIES, model_folder_name
from . import manifest as manifest_io
from . import stages
from .errors import ConverterError
from .sources import Source

CONVERTER_VERSION = 4  # 2: manifest lists the LiteRT.js browser artifacts; 3: speed, source.licence; 4: classifier features output
# Every build gets a folder of its own under <out>/.builds/; <out>/<id> is a symlink to the
# installed one, replaced by one atomic rename (see _install). Dot folders are not models.
BUILDS = paths.BUILDS
STALE_BUILD_SECONDS = 24 * 3600  # an unlinked build folder untouched this long was a killed build's


@dataclass
class BuildContext:
    """Handed to a family's ``build``: where to write, what from, and progress reporting."""
    name: str
    workdir: Path
    source: Source
    quantize: str
    out: Path
    imgsz: int | None = None  # input side, for families that take --imgsz
    steps: list = field(default_factory=list)

    @contextlib.contextmanager
    def step(self, label: str):
        started = time.perf_counter()
        print(f"[{self.name}] {label} ...", flush=True)
        yield
        seconds = time.perf_counter() - started
        self.steps.append({"step": label, "seconds": round(seconds, 2)})
        print(f"[{self.name}] {label} done in {seconds:.1f}s", flush=True)

    def log(self, message: str) -> None:
        print(f"[{self.name}]   {message}", flush=True)


def family(name: str):
    if name not in FAMILIES:
        raise ConverterError(f"unknown model {name!r}; valid: {', '.join(FAMILIES)}",
                             "run `python -m converters list`")
    return importlib.import_module(FAMILIES[name])


def options_of(weights: str | None, quantize: str, imgsz: int | None = None) -> dict:
    options = {"quantize": quantize, "weights": "none" if weights == "none" else "given" if weights else "default"}
    return options if imgsz is None else {**options, "imgsz": imgsz}


def installed_manifest(folder: Path) -> dict | None:
    """The valid manifest installed at ``folder``; None when there is none or it is not
    valid (an unknown schema_version, a broken file): what is there gets rebuilt."""
    try:
        return contract.read(folder)
    except (OSError, contract.InvalidManifest):
        return None


def is_up_to_date(target: Path, source: Source, options: dict) -> bool:
    current = installed_manifest(target)
    return bool(current
                and current.get("converter_version") == CONVERTER_VERSION
                and current.get("source", {}).get("sha256") == source.sha256
                and current.get("options") == options)


def trained_side(family, source) -> int | None:
    """Without --imgsz, a checkpoint builds at the side it was trained at, where that side is
    one the family takes (a multiple of its IMGSZ_STEP within range); else the default."""
    side = source.extra.get("trained_imgsz")
    step = getattr(family, "IMGSZ_STEP", None)
    low, high = stages.IMGSZ_RANGE
    return side if step and side and side % step == 0 and low <= side <= high else None


def check_model_id(model_id: str) -> str:
    if not limits.is_model_id(model_id):
        raise ConverterError(f"--id {model_id!r} is not a model id (letters, digits, '.', '_', '-'; 128 at most, "
                             "starting with a letter or digit)", "pass e.g. --id my-detector")
    return model_id


def base_id(mod, name: str, source: Source, model_id: str | None) -> str:
    """What a build is named before its size and quantisation: --id, else what the family
    names its source after (``model_id(source)``: yolo11n-pose), else the family."""
    if model_id:
        return check_model_id(model_id)
    return mod.model_id(source) if hasattr(mod, "model_id") else name


def other_model(target: Path, name: str, source: Source) -> str | None:
    """What already installed at ``target`` is not an earlier build of this model (another
    family, or other weights under a name taken from a file): None when it is ours to replace."""
    current = installed_manifest(target)
    if current is None:
        return None
    if current.get("name") != name:
        return f"a {current.get('name')} model"
    theirs = (current.get("source") or {}).get("sha256")
    if source.path is not None and theirs != source.sha256:
        return f"a build of other weights (source sha256 {str(theirs)[:12]}..., these are {source.sha256[:12]}...)"
    return None


def convert(name: str, weights: str | None = None, out: Path | None = None,
            quantize: str = "none", force: bool = False, imgsz: int | None = None,
            model_id: str | None = None) -> Path:
    """Build one model into ``out/<id>[-<imgsz>][-<quantize>]`` (``base_id``); returns the
    installed folder. A folder that holds another model (``other_model``) is replaced only
    with ``force``."""
    mod = family(name)
    given = stages.input_side(mod, imgsz) if imgsz is not None else None  # a bad --imgsz: before any work
    if model_id:
        check_model_id(model_id)
    started = time.perf_counter()
    source = mod.resolve_source(weights)
    trained = trained_side(mod, source)
    imgsz = given or trained or stages.input_side(mod, None)
    if given is None and imgsz != getattr(mod, "IMGSZ", None) and imgsz is not None:
        print(f"[{name}] {imgsz} px, the size the checkpoint was trained at (--imgsz builds another)")
    out = Path(out) if out else models_dir()
    # a checkpoint built at the size it was trained at is named without it (yolo26n-obb at 1024)
    target = out / model_folder_name(base_id(mod, name, source, model_id), quantize, imgsz,
                                     trained or getattr(mod, "IMGSZ", None))
    options = options_of(weights, quantize, imgsz)
    other = None if force else other_model(target, name, source)
    if other:
        raise ConverterError(f"{target} holds {other}; not replaced",
                             "name this build with --id NAME, or replace that model with --force")
    if not force and is_up_to_date(target, source, options):
        print(f"[{name}] up to date in {target} (same source sha256 and options; --force rebuilds)")
        return target

    builds = out / BUILDS
    builds.mkdir(parents=True, exist_ok=True)
    # Built in its own versioned folder beside the target (same filesystem): installing it
    # is one rename of a symlink, and the previous build serves until then.
    stamp = paths.build_stamp()
    workdir = Path(tempfile.mkdtemp(prefix=f"{target.name}-{stamp}-", dir=builds))
    try:
        ctx = BuildContext(name=name, workdir=workdir, source=source, quantize=quantize, out=out, imgsz=imgsz)
        built = mod.build(ctx)
        with ctx.step("write manifest"):
            manifest = {
                "schema_version": contract.SCHEMA_VERSION,
                "converter_version": CONVERTER_VERSION,
                "id": target.name,
                "name": name,
                "task": mod.TASK,
                "summary": mod.SUMMARY,
                "quantization": quantize,
                "source": source.describe(),
                "options": options,
                **built,
                "files": contract.file_sizes(workdir),
                "files_sha256": contract.file_digests(workdir),  # what the server verifies
                "tools": manifest_io.tool_versions(),
                "created": manifest_io.now_iso(),
            }
            manifest["litert"] = contract.litert_artifacts(manifest)
            manifest["steps"] = ctx.steps
            manifest_io.write(workdir, manifest)  # validated against the schema first
        previous = _install(workdir, target)
    except BaseException:
        shutil.rmtree(workdir, ignore_errors=True)
        with contextlib.suppress(OSError):
            builds.rmdir()  # only when empty: nothing else was ever built here
        raise
    if previous is not None:
        shutil.rmtree(previous, ignore_errors=True)
    _sweep(builds, target)
    print(f"[{name}] installed {target} in {time.perf_counter() - started:.1f}s total")
    return target


def _install(build: Path, target: Path) -> Path | None:
    """Point ``target`` at ``build`` (a folder in <out>/.builds) with one atomic rename of a
    new symlink, so ``target`` is the previous model or the new one at every instant, crash or
    not. Returns the build it replaced, for the caller to remove (None when there is none
    of ours: a symlink to elsewhere is repointed, never followed and deleted)."""
    previous = None
    if target.is_symlink():
        pointed = Path(os.path.normpath(target.parent / os.readlink(target)))
        previous = pointed if pointed.parent == build.parent else None
    elif target.exists():
        # A real folder, installed before builds were versioned: moved into .builds once, the
        # one step that is not atomic (a crash there leaves the model in .builds, not lost).
        previous = build.parent / f"{target.name}-unversioned-{build.name.rsplit('-', 1)[-1]}"
        target.rename(previous)
    link = target.with_name(f".{target.name}.link-{os.getpid()}")
    try:
        with contextlib.suppress(FileNotFoundError):
            link.unlink()
        link.symlink_to(build.relative_to(target.parent))  # relative: the models folder can move
        os.replace(link, target)
    except BaseException:
        with contextlib.suppress(OSError):
            link.unlink()
        if previous is not None and not target.is_symlink() and not target.exists():
            previous.rename(target)  # put the unversioned folder back
        raise
    return previous


def _sweep(builds: Path, target: Path) -> None:
    """Remove this model's build folders that its link does not point to and that stopped
    changing a day ago: what a killed build left behind (a build still running is younger)."""
    installed = target.resolve()
    for folder in builds.iterdir():
        with contextlib.suppress(OSError):
            if ((paths.build_folder(folder.name) or ("",))[0] == target.name and folder.resolve() != installed
                    and time.time() - folder.stat().st_mtime > STALE_BUILD_SECONDS):
                shutil.rmtree(folder, ignore_errors=True)


def is_installed(name: str, out: Path | None, quantize: str) -> bool:
    """Installed by this converter version (an older one's output is rebuilt by `all`)."""
    folder = Path(out) if out else models_dir()
    current = installed_manifest(folder / model_folder_name(name, quantize))
    return bool(current) and current.get("converter_version") == CONVERTER_VERSION


def summaries() -> list[tuple[str, str, str]]:
    rows = []
    for name in FAMILIES:
        try:
            mod = family(name)
            rows.append((name, mod.TASK, mod.SUMMARY))
        except ImportError as exc:  # a family module missing its optional deps
            rows.append((name, "?", f"unavailable: {exc}"))
    return rows


def report_error(exc: ConverterError) -> None:
    print(f"error: {exc.message}", file=sys.stderr)
    if exc.fix:
        print(f"  fix: {exc.fix}", file=sys.stderr)
