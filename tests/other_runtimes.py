"""Run an ONNX model on tract, IREE (llvm-cpu), TVM (relax, llvm) and tinygrad (CPU/clang).

For the suite (``check/test_runtimes.py``) and ``bench/runtimes.py``; the runtimes come with
the test extra, not with the package.

One function per runtime, same signature::

    run_tract(model, feeds)    -> list[np.ndarray]
    run_iree(model, feeds)     -> list[np.ndarray]
    run_tvm(model, feeds)      -> list[np.ndarray]
    run_tinygrad(model, feeds) -> list[np.ndarray]

``model`` is an ``onnx.ModelProto``, serialized bytes, or a path; ``feeds`` maps graph-input names
to numpy arrays (every non-initializer input). Outputs come back in graph-output order.

Each runtime is set to ONE thread (import this module before the runtimes, or at least before
their first run): tract runs single-threaded unless given a thread pool; IREE uses the
``local-sync`` driver (no worker threads); TVM gets ``TVM_NUM_THREADS=1`` and its thread pool is
configured to 1; tinygrad gets ``NUM_CPU_THREADS=1`` (+ ``THREADS=0`` for its CPU renderer).

Caching: compiled artifacts are kept per (model bytes, options[, input shapes]) in-process, so a
pytest suite compiles each model once. ``prepare_<runtime>`` returns the compiled callable alone
(for timing: ``fn = prepare_tvm(model); fn(feeds)``), without timing the conversion. The suite
compiles without optimizing (``RUNNERS``' TVM, ``compile_tinygrad_unoptimized``); the timed
runs of ``bench/runtimes.py`` with each runtime's defaults.

Symbolic dims: tract, IREE and TVM compile a model whose inputs have symbolic dims as is and run
it at any concrete size; tinygrad binds them on its first call, so it is cached per input shape.

The runtimes are imported lazily: a missing one only fails its own function.
Everything a runtime prints while converting or compiling (TVM's C++ warnings, IREE's
diagnostics) is captured at file-descriptor level and attached to the exception on failure.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import pathlib
import shlex
import tempfile
import threading
from collections.abc import Callable, Mapping

os.environ.setdefault("TVM_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("NUM_CPU_THREADS", "1")  # tinygrad: kernels' thread count
os.environ.setdefault("THREADS", "0")  # tinygrad CPU renderers: no threads at all
os.environ.setdefault("PARALLEL", "0")  # tinygrad: no parallel compile/beam workers

import numpy as np  # noqa: E402
import onnx  # noqa: E402

__all__ = [
    "RUNNERS",
    "RuntimeFailure",
    "compile_tinygrad_unoptimized",
    "prepare_iree",
    "prepare_tinygrad",
    "prepare_tract",
    "prepare_tvm",
    "run_iree",
    "run_tinygrad",
    "run_tract",
    "run_tvm",
    "versions",
]

Feeds = Mapping[str, np.ndarray]
Prepared = Callable[[Feeds], list]
_CACHE: dict[tuple, Prepared] = {}
_LOCK = threading.Lock()
_WORKDIR = pathlib.Path(tempfile.mkdtemp(prefix="gs_runners_"))


class RuntimeFailure(RuntimeError):
    """A runtime refused or failed to convert, compile or run a model (``stage`` says which)."""

    def __init__(self, runtime: str, stage: str, error: BaseException, captured: str = ""):
        self.runtime, self.stage, self.error, self.captured = runtime, stage, error, captured
        text = f"{type(error).__name__}: {error}"
        super().__init__(f"{runtime} {stage}: {_first_lines(text, 12)}")


def _first_lines(text: str, n: int) -> str:
    lines = [line for line in str(text).splitlines() if line.strip()]
    return "\n".join(lines[:n]) + ("\n..." if len(lines) > n else "")


@contextlib.contextmanager
def _quiet():
    """Redirect fds 1 and 2 to a temp file (C++ logging writes there); yields a reader."""
    captured = {"text": ""}
    with tempfile.TemporaryFile(mode="w+b") as sink:
        saved = [os.dup(1), os.dup(2)]
        try:
            import sys

            sys.stdout.flush(), sys.stderr.flush()
            os.dup2(sink.fileno(), 1)
            os.dup2(sink.fileno(), 2)
            try:
                yield captured
            finally:
                sys.stdout.flush(), sys.stderr.flush()
                os.dup2(saved[0], 1)
                os.dup2(saved[1], 2)
                sink.seek(0)
                captured["text"] = sink.read().decode(errors="replace")
        finally:
            for fd in saved:
                os.close(fd)


def _stage(runtime: str, stage: str, fn: Callable, *args, **kwargs):
    if stage == "run":  # no fd redirection on the hot path (it costs ~ms per call)
        try:
            return fn(*args, **kwargs)
        except Exception as error:  # noqa: BLE001
            raise RuntimeFailure(runtime, stage, error) from error
    with _quiet() as out:
        try:
            return fn(*args, **kwargs)
        except RuntimeFailure:
            raise
        except Exception as error:  # noqa: BLE001 - every refusal becomes a RuntimeFailure
            failure = error
            import gc
            import traceback

            traceback.clear_frames(error.__traceback__)  # frames' locals (TVM's BlockBuilder) die
            gc.collect()  # TVM's half-built BlockBuilder warns when collected: do it while quiet
    raise RuntimeFailure(runtime, stage, failure, out["text"]) from failure


# ---------------------------------------------------------------- model handling


def _proto(model) -> onnx.ModelProto:
    if isinstance(model, onnx.ModelProto):
        return model
    if isinstance(model, (bytes, bytearray)):
        return onnx.load_from_string(bytes(model))
    return onnx.load(str(model))


def _bytes(model) -> bytes:
    if isinstance(model, (bytes, bytearray)):
        return bytes(model)
    if isinstance(model, onnx.ModelProto):
        return model.SerializeToString()
    return pathlib.Path(model).read_bytes()


def _key(runtime: str, data: bytes, *extra) -> tuple:
    return (runtime, hashlib.sha1(data).hexdigest(), *extra)


def _input_names(proto: onnx.ModelProto) -> list[str]:
    inits = {i.name for i in proto.graph.initializer}
    return [i.name for i in proto.graph.input if i.name not in inits]


def _shapes_of(feeds: Feeds) -> tuple:
    return tuple(
        sorted((k, np.asarray(v).shape, np.asarray(v).dtype.str) for k, v in feeds.items())
    )


def _ordered(proto: onnx.ModelProto, feeds: Feeds) -> list[np.ndarray]:
    names = _input_names(proto)
    missing = [n for n in names if n not in feeds]
    if missing:
        raise KeyError(f"missing feeds: {missing}")
    return [np.ascontiguousarray(feeds[n]) for n in names]


def _cached(key: tuple, build: Callable[[], Prepared]) -> Prepared:
    with _LOCK:
        if key in _CACHE:
            return _CACHE[key]
    prepared = build()
    with _LOCK:
        _CACHE[key] = prepared
    return prepared


# ---------------------------------------------------------------- tract


def prepare_tract(model, feeds: Feeds | None = None) -> Prepared:
    """tract: loaded from a file (the bindings take a path), then optimized and made runnable.

    Symbolic input facts are kept (tract's TDim symbols): the runnable takes any size.
    """
    import tract

    data = _bytes(model)
    proto = _proto(model)
    key = _key("tract", data)

    def build() -> Prepared:
        path = _WORKDIR / f"{key[1]}.onnx"
        path.write_bytes(data)

        def load():
            return tract.onnx().load(str(path)).into_model().into_runnable()

        runnable = _stage("tract", "load/optimize", load)

        def run(feeds_: Feeds) -> list:
            inputs = _ordered(proto, feeds_)
            outs = _stage("tract", "run", runnable.run, inputs)
            return [o.to_numpy() for o in outs]

        return run

    return _cached(key, build)


def _tract_aborts(proto: onnx.ModelProto, feeds: Feeds) -> str:
    """Why tract would abort the whole process on this model, or "".

    tract 0.23.9 panics across the FFI on a cubic GridSample that is not 2-D ("Bicubic
    interpolation only supports 2D spatial dimensions"): such a model is refused first.
    """
    for node in proto.graph.node:
        if node.op_type != "GridSample":
            continue
        mode = next((a.s.decode() for a in node.attribute if a.name == "mode"), "linear")
        x = np.asarray(feeds.get(node.input[0], np.zeros((1, 1, 1, 1))))
        if mode in ("cubic", "bicubic") and x.ndim != 4:
            return f"tract would abort the process: {x.ndim - 2}-D cubic GridSample"
    return ""


def run_tract(model, feeds: Feeds) -> list[np.ndarray]:
    proto = _proto(model)
    refusal = _tract_aborts(proto, feeds)
    if refusal:
        raise RuntimeFailure("tract", "refused", NotImplementedError(refusal))
    return prepare_tract(model, feeds)(feeds)


# ---------------------------------------------------------------- IREE


def _iree_mlir(proto: onnx.ModelProto) -> str:
    """What ``iree-import-onnx`` does: shape inference with data propagation, then import."""
    from iree.compiler import ir
    from iree.compiler.extras import onnx_importer

    inferred = onnx.shape_inference.infer_shapes(proto, data_prop=True)
    context = ir.Context()
    info = onnx_importer.ModelInfo(inferred)
    module = info.create_module(context=context).operation
    importer = onnx_importer.NodeImporter.define_function(info.main_graph, module)
    importer.import_all()
    module.verify()
    return module.get_asm(assume_verified=True)


IREE_FLAGS = ["--iree-llvmcpu-target-cpu=host"]


def prepare_iree(model, feeds: Feeds | None = None) -> Prepared:
    """IREE: ONNX -> torch-mlir (onnx_importer) -> vmfb for llvm-cpu -> ``local-sync`` context.

    Dynamic dims compile to a module with dynamic shapes.
    """
    import iree.compiler as ireec
    import iree.runtime as ireert

    proto = _proto(model)
    key = _key("iree", proto.SerializeToString())

    def build() -> Prepared:
        asm = _stage("iree", "import", _iree_mlir, proto)
        vmfb = _stage(
            "iree",
            "compile",
            ireec.compile_str,
            asm,
            target_backends=["llvm-cpu"],
            input_type="onnx",
            extra_args=IREE_FLAGS,
        )

        def load():
            config = ireert.Config("local-sync")
            context = ireert.SystemContext(config=config)
            vm_module = ireert.VmModule.copy_buffer(context.instance, vmfb)
            context.add_vm_module(vm_module)
            return context.modules[vm_module.name][proto.graph.name or "main_graph"]

        function = _stage("iree", "load", load)

        def run(feeds_: Feeds) -> list:
            inputs = _ordered(proto, feeds_)
            result = _stage("iree", "run", function, *inputs)
            results = result if isinstance(result, (list, tuple)) else [result]
            return [np.asarray(r.to_host() if hasattr(r, "to_host") else r) for r in results]

        return run

    return _cached(key, build)


def run_iree(model, feeds: Feeds) -> list[np.ndarray]:
    return prepare_iree(model, feeds)(feeds)


# ---------------------------------------------------------------- TVM


@functools.cache
def _tvm_target(llvm_opt_level: int | None = None):
    import tvm

    options = {"kind": "llvm", "mcpu": tvm.target.codegen.llvm_get_system_cpu()}
    if llvm_opt_level is not None:
        options["opt-level"] = llvm_opt_level
    # 1 thread (TVM_NUM_THREADS is read when the pool starts; this fixes it if it already did).
    # It also pins the calling thread to core 0: undone, or every runtime run after it in this
    # process (and every pytest-xdist worker) shares that one core.
    config = tvm.get_global_func("runtime.config_threadpool", allow_missing=True)
    if config is not None:
        cores = os.sched_getaffinity(0)
        config(1, 1)
        os.sched_setaffinity(0, cores)
    return tvm.target.Target(options)


def prepare_tvm(
    model,
    feeds: Feeds | None = None,
    fold_constants: bool = True,
    llvm_opt_level: int | None = None,
) -> Prepared:
    """TVM relax: ``from_onnx`` -> DecomposeOpsForInference, CanonicalizeBindings and the "zero"
    pipeline (LegalizeOps, FoldConstant, FuseOps, FuseTIR), as TVM's import tutorial compiles
    before ``tvm.compile`` (llvm), whose default CPU pipeline fuses nothing.

    ``fold_constants=False`` leaves FoldConstant out (the suite's runs): it compiles every
    constant expression the ONNX frontend writes (a few per Gather) with LLVM on its own, 25 s
    of a 3-D cubic graph's 30. ``llvm_opt_level=0`` (the suite's runs too) has LLVM generate
    code without optimizing it: TVM's own passes are the same, and a 3-D cubic graph compiles in
    2.3 s instead of 13.9 (``bench/runtimes.py``, which times the code, checks its outputs at
    LLVM's default level). Symbolic dims become relax ``tir.Var``s; the compiled VM takes
    any concrete size.
    """
    import tvm
    from tvm import relax
    from tvm.relax.frontend.onnx import from_onnx

    proto = _proto(model)
    key = _key("tvm", proto.SerializeToString(), fold_constants, llvm_opt_level)

    def build() -> Prepared:
        target = _tvm_target(llvm_opt_level)
        mod = _stage("tvm", "import", from_onnx, proto, keep_params_in_input=False)

        def compile_():
            with target:
                lowered = relax.transform.DecomposeOpsForInference()(mod)
                lowered = relax.transform.CanonicalizeBindings()(lowered)
                if fold_constants:
                    lowered = relax.get_pipeline("zero")(lowered)  # legalize, fold, fuse
                else:
                    passes = [relax.transform.LegalizeOps(), relax.transform.AnnotateTIROpPattern()]
                    passes += [relax.transform.FuseOps(), relax.transform.FuseTIR()]
                    lowered = tvm.transform.Sequential(passes)(lowered)
            return tvm.compile(lowered, target=target)

        executable = _stage("tvm", "compile", compile_)
        vm = _stage("tvm", "load", relax.VirtualMachine, executable, tvm.cpu())
        main = vm["main"]

        def run(feeds_: Feeds) -> list:
            inputs = [tvm.runtime.tensor(a) for a in _ordered(proto, feeds_)]
            result = _stage("tvm", "run", main, *inputs)
            results = list(result) if isinstance(result, (list, tuple, tvm.ir.Array)) else [result]
            return [r.numpy() for r in results]

        return run

    return _cached(key, build)


def run_tvm(
    model, feeds: Feeds, fold_constants: bool = True, llvm_opt_level: int | None = None
) -> list[np.ndarray]:
    return prepare_tvm(model, feeds, fold_constants, llvm_opt_level)(feeds)


# ---------------------------------------------------------------- tinygrad


def prepare_tinygrad(model, feeds: Feeds, *, jit: bool = False) -> Prepared:
    """tinygrad: ``OnnxRunner`` (its own protobuf parser; builds the graph per call, lazily).

    Cached per input shapes: the runner binds symbolic dims and caches Shape-derived constants
    on first call. ``jit``: wrap the call in ``TinyJit`` (captures kernels after 2 calls; what
    a timing loop wants; needs identical input shapes on every call).
    """
    from tinygrad import Tensor, TinyJit
    from tinygrad.nn.onnx import OnnxRunner

    data = _bytes(model)
    proto = _proto(model)
    key = _key("tinygrad", data, _shapes_of(feeds), jit)
    outputs = [o.name for o in proto.graph.output]

    def build() -> Prepared:
        path = _WORKDIR / f"{key[1]}.onnx"
        path.write_bytes(data)
        runner = _stage("tinygrad", "load", OnnxRunner, str(path))

        def call(**inputs):
            out = runner(inputs)
            return [out[name].realize() for name in outputs]

        step = TinyJit(call) if jit else call

        def run(feeds_: Feeds) -> list:
            inputs = {k: Tensor(np.ascontiguousarray(v)).realize() for k, v in feeds_.items()}
            result = _stage("tinygrad", "run", step, **inputs)
            return [r.numpy() for r in result]

        def timer(feeds_: Feeds) -> Callable[[], None]:
            """A zero-argument call for timing: inputs realized once, no copy back, synchronized."""
            from tinygrad import Device

            inputs = {k: Tensor(np.ascontiguousarray(v)).realize() for k, v in feeds_.items()}
            device = Device[Device.DEFAULT]

            def call() -> None:
                step(**inputs)
                device.synchronize()

            return call

        run.timer = timer
        return run

    return _cached(key, build)


def run_tinygrad(model, feeds: Feeds) -> list[np.ndarray]:
    return prepare_tinygrad(model, feeds)(feeds)


def compile_tinygrad_unoptimized() -> None:
    """Have tinygrad's clang compile without optimizing (the suite's runs; call it before
    tinygrad is imported: it reads both settings once).

    clang -O2 took 100 s on one kernel of a lowered 3-D cubic graph (its 64 taps' loops fused
    into one), -O0 0.2 s: tinygrad's share of the suite on a machine with no kernels cached
    went from 170 to 104 s. The kernels are cached in this process's own database, so none
    compiled so reaches the default cache that ``bench/runtimes.py``'s timed runs read
    (tinygrad keys its cache by the kernel's source, not by the flags).
    """
    wrapper = _WORKDIR / "cc_unoptimized"
    compiler = shlex.quote(os.environ.get("CC", "clang"))
    wrapper.write_text(f'#!/bin/sh\nexec {compiler} "$@" -O0\n')  # (the last -O wins)
    wrapper.chmod(0o755)
    os.environ["CC"] = str(wrapper)
    os.environ["CACHEDB"] = str(_WORKDIR / "tinygrad_unoptimized.db")


RUNNERS: dict[str, Callable[..., list[np.ndarray]]] = {
    "tract": run_tract,
    "iree": run_iree,
    # (compile time: prepare_tvm)
    "tvm": functools.partial(run_tvm, fold_constants=False, llvm_opt_level=0),
    "tinygrad": run_tinygrad,
}


def versions() -> dict[str, str]:
    """Each runtime's installed version ("missing" where it is not installed)."""
    from importlib import metadata

    packages = {
        "tract": "tract",
        "iree": "iree-base-runtime",
        "tvm": "apache-tvm",
        "tinygrad": "tinygrad",
    }
    found = {}
    for runtime, package in packages.items():
        try:
            found[runtime] = metadata.version(package)
        except metadata.PackageNotFoundError:
            found[runtime] = "missing"
    return found
