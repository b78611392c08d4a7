"""One .tflite file, run with LiteRT (ai-edge-litert), safe under concurrent requests.

A LiteRT interpreter is not thread-safe (its input/output tensors are shared state), so a
``LiteRTModel`` keeps a small pool of interpreters of the same file: a request takes one,
runs it and gives it back, waiting while all are busy. The pool grows lazily up to
``pool_size`` (the setting DATARAILROAD_INTERPRETERS, default 1: the pool is then a lock).
The runners pass their settings' values (server/settings.py); a model built without
them (a test, a bench) takes this process's, ``load()``.

Inputs and outputs are addressed by the signature's keys when the file has a
``serving_default`` signature (our converters write one), otherwise by tensor name.

Before this process loads a file, ``trial_load`` loads and runs it once in a child process:
a file that crashes LiteRT (a truncated .tflite segfaults it) fails there, not in the worker.
"""
from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

from ..settings import load

TRIAL_TIMEOUT_S = 120

# Run in a child process by trial_load: load the file and run it once on zeros.
_TRIAL = """
import sys
import numpy as np
from ai_edge_litert.interpreter import Interpreter
interpreter = Interpreter(model_path=sys.argv[1], num_threads=1)
interpreter.allocate_tensors()
for d in interpreter.get_input_details():
    interpreter.set_tensor(d["index"], np.zeros(d["shape"], dtype=d["dtype"]))
interpreter.invoke()
"""


class LoadError(RuntimeError):
    """The file does not load or run in LiteRT (found by trial_load, in a child process)."""


_trials: dict[tuple, str | None] = {}  # file version -> why it failed (None: it ran)
_trials_lock = threading.Lock()


def trial_load(path: Path) -> None:
    """Load and run ``path`` once in a child process before this process loads it: a file
    that crashes LiteRT (a truncated or corrupt flatbuffer can segfault it) then kills the
    child, not the server worker, and raises LoadError here. Once per file version."""
    st = Path(path).stat()
    key = (str(path), st.st_size, st.st_mtime_ns, st.st_ino)
    with _trials_lock:
        if key in _trials:
            failure = _trials[key]
            if failure:
                raise LoadError(failure)
            return
    try:
        done = subprocess.run([sys.executable, "-c", _TRIAL, str(path)], capture_output=True, text=True,
                              timeout=TRIAL_TIMEOUT_S, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
        if done.returncode < 0:
            failure = f"LiteRT crashed on it ({signal.Signals(-done.returncode).name}) in a trial run"
        elif done.returncode:
            last = (done.stderr.strip().splitlines() or ["no message"])[-1]
            failure = f"LiteRT could not load or run it: {last[:300]}"
        else:
            failure = None
    except subprocess.TimeoutExpired:
        failure = f"a trial run did not finish in {TRIAL_TIMEOUT_S} s"
    with _trials_lock:
        _trials[key] = failure
    if failure:
        raise LoadError(failure)


def _io_maps(interpreter) -> tuple[dict, dict]:
    """name -> (index, dtype, shape) of each input, name -> index of each output: the serving
    signature's names where there is one. (A function of its own: the signature runner must be
    gone before the interpreter runs, as it holds a reference LiteRT counts as unsafe.)"""
    if "serving_default" in interpreter.get_signature_list():
        runner = interpreter.get_signature_runner("serving_default")
        return ({k: (d["index"], d["dtype"], tuple(d["shape"])) for k, d in runner.get_input_details().items()},
                {k: d["index"] for k, d in runner.get_output_details().items()})
    return ({d["name"]: (d["index"], d["dtype"], tuple(d["shape"])) for d in interpreter.get_input_details()},
            {d["name"]: d["index"] for d in interpreter.get_output_details()})


class _Instance:
    """One interpreter with its input/output index maps."""

    def __init__(self, path: Path, threads: int):
        from ai_edge_litert.interpreter import Interpreter

        self.interpreter = Interpreter(model_path=str(path), num_threads=threads)
        self.interpreter.allocate_tensors()
        self.inputs, self.outputs = _io_maps(self.interpreter)
        # The first invoke packs the weights for XNNPACK (tens of ms to seconds): paid here, at
        # load, not by the first request.
        self.run({key: np.zeros(shape, dtype) for key, (_, dtype, shape) in self.inputs.items()})

    def run(self, feed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        for key, (index, dtype, _) in self.inputs.items():
            self.interpreter.set_tensor(index, np.ascontiguousarray(feed[key], dtype=dtype))
        self.interpreter.invoke()
        # get_tensor copies: the arrays stay valid after the interpreter goes back to the pool.
        return {key: self.interpreter.get_tensor(index) for key, index in self.outputs.items()}


class LiteRTModel:
    def __init__(self, path: Path, threads: int | None = None, pool_size: int | None = None):
        """``threads`` per interpreter (default: the setting DATARAILROAD_INFER_THREADS, the
        cores left per gunicorn worker); ``pool_size`` interpreters at most (default:
        DATARAILROAD_INTERPRETERS, 1: with one worker per core the CPUs are busy anyway, and
        a second interpreter mostly costs memory, as XNNPACK repacks the weights for each)."""
        self.path = Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(f"{self.path} is missing")
        trial_load(self.path)  # a file that crashes LiteRT fails here, in a child process
        self.threads = threads or load().infer_threads
        self.pool_size = pool_size or load().interpreters
        self._idle: queue.LifoQueue[_Instance] = queue.LifoQueue()
        self._created = 0
        self._lock = threading.Lock()
        first = _Instance(self.path, self.threads)  # load now: a broken file fails at load, not mid-request
        self.input_keys = list(first.inputs)
        self.output_keys = list(first.outputs)
        self._created = 1
        self._idle.put(first)
        self._batcher: _Batcher | None = None

    def batch(self, max_batch: int | None = None, wait_s: float | None = None) -> None:
        """Stack concurrent run1() calls into invokes of up to ``max_batch`` inputs (default:
        the setting DATARAILROAD_BATCH, 4; 1 turns batching off; single-input models only),
        the head of the queue waiting up to ``wait_s`` for more (default:
        DATARAILROAD_BATCH_WAIT_MS, 0: a batch is the runs that queued while the previous
        invoke ran, no latency added). Only where bench/server.py measured more req/s: the
        classifier (efficientnet-lite0, ~1.2x at 8 clients); yolov5n's graph has a fixed batch
        of 1, the hand models were not measured."""
        max_batch = load().batch if max_batch is None else max_batch
        wait_s = load().batch_wait_ms / 1e3 if wait_s is None else wait_s
        self._batcher = _Batcher(self, max_batch, wait_s) if max_batch > 1 and len(self.input_keys) == 1 else None

    def _take(self) -> _Instance:
        try:
            return self._idle.get_nowait()
        except queue.Empty:
            pass
        with self._lock:
            if self._created < self.pool_size:
                self._created += 1
                grow = True
            else:
                grow = False
        if grow:
            try:
                return _Instance(self.path, self.threads)
            except Exception:
                with self._lock:
                    self._created -= 1
                raise
        return self._idle.get()  # all busy: wait for one

    def run(self, feed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        instance = self._take()
        try:
            return instance.run(feed)
        finally:
            self._idle.put(instance)

    def run1(self, x: np.ndarray) -> dict[str, np.ndarray]:
        """Single-input models: feed ``x`` to the one input (stacked with concurrent calls
        once batch() is on)."""
        if self._batcher is not None:
            return self._batcher.run1(x)
        return self.run({self.input_keys[0]: x})


class _Slot:
    """One caller's input in a batch, and its answer."""

    def __init__(self, x: np.ndarray):
        self.x, self.result, self.error, self.done = x, None, None, False


class _Batcher:
    """Stacks concurrent run1() inputs ([1, ...] each) into one invoke of up to max_batch rows.

    The caller at the head of the queue, while no batch runs, leads the next batch: it waits
    up to ``wait_s`` for more callers (or until max_batch are in), invokes an interpreter
    resized to that batch, and hands each caller its row. A graph that can't be resized
    (fixed batch of 1) runs every input on its own, as without batching."""

    def __init__(self, model: LiteRTModel, max_batch: int, wait_s: float):
        self.model, self.max_batch, self.wait_s = model, max_batch, wait_s
        self._cond = threading.Condition()
        self._pending: list[_Slot] = []
        self._leading = False
        self._instances: dict[int, _Instance | None] = {}  # batch size -> interpreter (None: can't)

    def run1(self, x: np.ndarray) -> dict[str, np.ndarray]:
        slot = _Slot(x)
        with self._cond:
            self._pending.append(slot)
            self._cond.notify_all()
            while not slot.done and (self._leading or self._pending[0] is not slot):
                self._cond.wait()
            if not slot.done:  # lead the next batch
                self._leading = True
                deadline = time.monotonic() + self.wait_s
                while len(self._pending) < self.max_batch and time.monotonic() < deadline:
                    self._cond.wait(deadline - time.monotonic())
                batch = self._pending[:self.max_batch]
                del self._pending[:len(batch)]
        if not slot.done:
            self._run(batch)
            with self._cond:
                self._leading = False
                self._cond.notify_all()
        if slot.error is not None:
            raise slot.error
        return slot.result

    def _run(self, batch: list[_Slot]) -> None:
        try:
            instance = self._instance(len(batch)) if len(batch) > 1 else None
            if instance is None:
                for s in batch:
                    s.result = self.model.run({self.model.input_keys[0]: s.x})
            else:
                outputs = instance.run({self.model.input_keys[0]: np.concatenate([s.x for s in batch])})
                for i, s in enumerate(batch):
                    s.result = {k: v[i:i + 1] for k, v in outputs.items()}
        except Exception as exc:  # every caller of the batch gets it
            for s in batch:
                s.error = exc
        with self._cond:
            for s in batch:
                s.done = True

    def _instance(self, n: int) -> _Instance | None:
        """An interpreter with the input resized to [n, ...], or None when the graph can't be
        (its outputs must then have n rows too)."""
        if n not in self._instances:
            try:
                inst = _Instance(self.model.path, self.model.threads)
                (index, _, shape), = inst.inputs.values()
                inst.interpreter.resize_tensor_input(index, [n, *shape[1:]])
                inst.interpreter.allocate_tensors()
                outputs = inst.interpreter.get_output_details()
                inst = inst if all(len(d["shape"]) and d["shape"][0] == n for d in outputs) else None
            except (RuntimeError, ValueError):
                inst = None
            self._instances[n] = inst
        return self._instances[n]
