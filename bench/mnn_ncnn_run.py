"""Convert and run ONNX models on MNN and on ncnn (through pnnx), for bench/mnn_ncnn.py.

Run in the bench venv (not the test one; see bench/mnn_ncnn.py for the commands that make it).
MNN: the converter's C entry point ``_tools.mnnconvert``, in a subprocess: the ``mnnconvert``
console script pip-installs a logging SDK that downgrades protobuf (docs in RUNTIMES.md).
ncnn: the standalone ``pnnx`` binary of the pip package, run in a scratch folder, then the
``ncnn`` Python module with fp16/bf16 off and one thread.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import tempfile

import numpy as np
import onnx

PNNX = (
    pathlib.Path(sys.prefix)
    / "lib"
    / f"python{sys.version_info[0]}.{sys.version_info[1]}"
    / "site-packages"
    / "pnnx"
    / "pnnx"
)


def mnn_convert(model: onnx.ModelProto, folder: pathlib.Path) -> pathlib.Path:
    onnx_path, mnn_path = folder / "m.onnx", folder / "m.mnn"
    onnx.save(model, onnx_path)
    code = (
        "import _tools, sys; _tools.mnnconvert(['mnnconvert', '-f', 'ONNX', '--modelFile', "
        f"{str(onnx_path)!r}, '--MNNModel', {str(mnn_path)!r}, '--bizCode', 'bench'])"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    if not mnn_path.exists():
        raise RuntimeError(f"MNN conversion failed: {(done.stdout + done.stderr)[-600:]}")
    return mnn_path


class MNNRunner:
    """One MNN session of a converted model, one thread, high precision."""

    def __init__(self, path: pathlib.Path, threads: int = 1) -> None:
        import MNN

        self.MNN = MNN
        self.net = MNN.Interpreter(str(path))
        self.net.setSessionMode(9)  # (session_release: keep the model's data)
        self.session = self.net.createSession({"numThread": threads, "precision": "high"})

    def __call__(self, feeds: dict[str, np.ndarray]) -> np.ndarray:
        MNN = self.MNN
        for name, value in feeds.items():
            tensor = self.net.getSessionInput(self.session, name)
            if list(tensor.getShape()) != list(value.shape):
                self.net.resizeTensor(tensor, tuple(value.shape))
                self.net.resizeSession(self.session)
        for name, value in feeds.items():
            tensor = self.net.getSessionInput(self.session, name)
            host = MNN.Tensor(
                value.shape,
                MNN.Halide_Type_Float,
                np.ascontiguousarray(value, np.float32),
                MNN.Tensor_DimensionType_Caffe,
            )
            tensor.copyFrom(host)
        self.net.runSession(self.session)
        return self.output()

    def run_only(self) -> None:
        """The session again on the inputs it holds (what is timed: no copies in or out)."""
        self.net.runSession(self.session)

    def output(self) -> np.ndarray:
        MNN = self.MNN
        out = self.net.getSessionOutputAll(self.session)
        out = next(iter(out.values()))
        host = MNN.Tensor(
            out.getShape(),
            MNN.Halide_Type_Float,
            np.zeros(out.getShape(), np.float32),
            MNN.Tensor_DimensionType_Caffe,
        )
        out.copyToHostTensor(host)
        return np.array(host.getData(), dtype=np.float32).reshape(out.getShape())


def pnnx_convert(
    model: onnx.ModelProto, shapes: list[tuple[int, ...]], folder: pathlib.Path
) -> tuple[pathlib.Path, pathlib.Path, str]:
    """(param, bin, pnnx's log) of ``model`` converted by pnnx at these input shapes."""
    onnx.save(model, folder / "m.onnx")
    shape_arg = ",".join("[" + ",".join(map(str, s)) + "]" for s in shapes)
    done = subprocess.run(
        [str(PNNX), "m.onnx", f"inputshape={shape_arg}"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=300,
    )
    param, weights = folder / "m.ncnn.param", folder / "m.ncnn.bin"
    if not param.exists():
        raise RuntimeError(f"pnnx failed: {(done.stdout + done.stderr)[-600:]}")
    return param, weights, done.stdout + done.stderr


def ncnn_unknown_layers(param: pathlib.Path) -> list[str]:
    """Layer types in the param file that this ncnn cannot create."""
    import ncnn

    types = []
    for line in param.read_text().splitlines()[2:]:
        kind = line.split()[0] if line.split() else ""
        if kind and kind not in types:
            types.append(kind)
    return [t for t in types if ncnn.create_layer(t) is None]


class NCNNRunner:
    """An ncnn net of a pnnx conversion: batch 1 (pnnx drops it), fp32 only, one thread."""

    def __init__(self, param: pathlib.Path, weights: pathlib.Path, threads: int = 1) -> None:
        import ncnn

        self.ncnn = ncnn
        self.net = ncnn.Net()
        opt = self.net.opt
        opt.num_threads = threads
        opt.use_fp16_packed = opt.use_fp16_storage = opt.use_fp16_arithmetic = False
        opt.use_bf16_storage = False
        opt.use_vulkan_compute = False
        if self.net.load_param(str(param)) != 0 or self.net.load_model(str(weights)) != 0:
            raise RuntimeError("ncnn could not load the model")
        text = param.read_text().splitlines()
        self.inputs = [line.split()[1] for line in text[2:] if line.startswith("Input")]

    def __call__(self, arrays: list[np.ndarray]) -> np.ndarray:
        ncnn = self.ncnn
        kept = [np.ascontiguousarray(value[0], np.float32) for value in arrays]  # Mat wraps them
        with self.net.create_extractor() as ex:
            for name, value in zip(self.inputs, kept, strict=True):
                ex.input(name, ncnn.Mat(value).clone())  # owned: in-place layers deref its refcount
            _, out = ex.extract("out0")
            return np.array(out, copy=True)[None]

    def run_only(self, arrays: list[np.ndarray]) -> None:
        """One extraction, its output left in ncnn's Mat (what is timed)."""
        ncnn = self.ncnn
        kept = [np.ascontiguousarray(value[0], np.float32) for value in arrays]
        with self.net.create_extractor() as ex:
            for name, value in zip(self.inputs, kept, strict=True):
                ex.input(name, ncnn.Mat(value).clone())
            ex.extract("out0")


def scratch() -> pathlib.Path:
    return pathlib.Path(tempfile.mkdtemp(prefix="mnn_ncnn_"))


os.environ.setdefault("OMP_NUM_THREADS", "1")
