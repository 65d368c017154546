"""Run bench/mlprodict_check.py's models in mlprodict's python runtime, for that script.

Run in mlprodict's own environment (see bench/mlprodict_check.py), never the package's:
mlprodict 0.9.1883 needs onnx 1.14 and numpy < 2, the package onnx >= 1.23. It imports neither
the package nor onnxruntime: it reads ``manifest.json`` in the work folder, runs each case's
models with ``OnnxInference(path, runtime="python", inplace=...)`` on its inputs (``<name>.npy``),
in place (the default) and not, and writes each output beside them
(``<form>.inplace<0|1>.npy``) or the error's first line to ``runs.json``; the package's side
judges them. (The driver is not bench/mlprodict.py: bench/ is first on the path, and that file
would hide the package.)
"""

from __future__ import annotations

import json
import pathlib
import sys
import traceback
import warnings

import numpy as np


def error_line(error: BaseException) -> str:
    """The op that raised (its module in mlprodict's ops_cpu) and the first line it raised.

    mlprodict wraps errors in "Unable to run operator" and "Issues with types": the first
    cause is what is told.
    """
    cause = error
    while cause.__cause__ is not None:
        cause = cause.__cause__
    ops = [
        frame.filename
        for frame in traceback.extract_tb(cause.__traceback__)
        if "/ops_cpu/op_" in frame.filename
    ]
    op = pathlib.Path(ops[-1]).stem.removeprefix("op_") if ops else "?"
    first = str(cause).splitlines()[0] if str(cause) else ""
    return f"{op}: {type(cause).__name__}: {first}"[:200]


def run(directory: pathlib.Path) -> dict:
    from mlprodict.onnxrt import OnnxInference

    cases = json.loads((directory / "manifest.json").read_text())
    runs = {}
    for case in cases:
        folder = directory / case["name"]
        entry = runs[case["name"]] = {}
        for form in case["forms"]:
            for inplace in (1, 0):
                key = f"{form}.inplace{inplace}"
                try:
                    session = OnnxInference(
                        str(folder / f"{form}.onnx"), runtime="python", inplace=bool(inplace)
                    )
                    feeds = {name: np.load(folder / f"{name}.npy") for name in session.input_names}
                    y = session.run(feeds)[session.output_names[0]]
                    np.save(folder / f"{key}.npy", np.asarray(y))
                    entry[key] = "ran"
                except Exception as error:  # noqa: BLE001  (a refusal is a result)
                    entry[key] = error_line(error)
        print(case["name"], flush=True)
    return runs


def main() -> None:
    directory = pathlib.Path(sys.argv[1])
    warnings.simplefilter("ignore")  # (mlprodict's imports warn about scikit-learn's)
    from importlib.metadata import version

    versions = {n: version(n) for n in ("mlprodict", "onnx", "numpy", "scipy")}
    versions["Python"] = sys.version.split()[0]
    done = {"versions": versions, "runs": run(directory)}
    (directory / "runs.json").write_text(json.dumps(done, indent=1))


if __name__ == "__main__":
    main()
