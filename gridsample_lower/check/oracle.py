"""What judges a model: onnxruntime where it runs it, else onnx.reference with our kernels.

``model_runner`` and ``Oracle`` choose and fall back; onnx.reference gets GridSample and
AffineGrid from ``check.reference`` and every other op's result rounded to the type the model
declares (``_keep_declared_types``), as onnxruntime computes it.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx
import onnx_ir as ir
from onnx import helper
from onnx.reference import ReferenceEvaluator
from onnx_ir.passes.common import InlinePass

from gridsample_lower.check.reference import AffineGridKernel, GridSampleKernel
from gridsample_lower.runtime import onnxruntime_runner
from gridsample_lower.text import one_line

__all__ = ["Oracle", "Runner", "candidate_runner", "declared_types", "model_runner"]

Runner = Callable[[dict], list[np.ndarray]]


def model_runner(
    model: onnx.ModelProto, *, native: bool = True, threads: int = 0
) -> tuple[Runner, str]:
    """Onnxruntime if ``native`` and it accepts ``model``, else onnx.reference with our kernel.

    ``threads``: onnxruntime's intra-op threads (0: its default); the many small sessions of
    isolated nodes use 1, since starting a thread pool per session costs more than it saves.
    """
    if native:
        try:
            return onnxruntime_runner(model, threads=threads, arena=False), "onnxruntime"
        except Exception:  # noqa: BLE001  (what onnxruntime refuses goes to the reference)
            pass
    model = _inline_functions(model)
    evaluator = ReferenceEvaluator(model, new_ops=[GridSampleKernel, AffineGridKernel])
    _keep_declared_types(evaluator, model)
    return (lambda feeds: evaluator.run(None, feeds)), "onnx.reference"


def _keep_declared_types(evaluator: ReferenceEvaluator, model: onnx.ModelProto) -> None:
    """Make each node of the main graph return the type the model declares for its outputs.

    onnx.reference computes some ops in a wider type than they declare (AffineGrid returns
    float32 for float16), where onnxruntime computes in float32 too but rounds to the declared
    type, as the model says; the rounded values are what the rest of the model then sees.
    """
    declared = declared_types(model)
    for node in evaluator.rt_nodes_:
        wanted = [declared.get(name) for name in node.output]
        if any(w is not None for w in wanted):
            node.run = _casting(node.run, wanted)


def _casting(run: Callable, wanted: list) -> Callable:
    def cast(*args, **kwargs):
        outputs = run(*args, **kwargs)
        return tuple(
            value.astype(wanted[k])
            if k < len(wanted) and wanted[k] is not None and isinstance(value, np.ndarray)
            else value
            for k, value in enumerate(outputs)
        )

    return cast


def declared_types(model: onnx.ModelProto) -> dict[str, np.dtype]:
    """Element type by value name, as declared or inferred (nothing where inference fails)."""
    try:
        graph = onnx.shape_inference.infer_shapes(model, strict_mode=False).graph
    except Exception:  # noqa: BLE001  (a model inference cannot read is still run as it is)
        graph = model.graph
    types = {}
    for info in [*graph.value_info, *graph.output]:
        elem = info.type.tensor_type.elem_type if info.type.HasField("tensor_type") else 0
        if elem and elem not in (onnx.TensorProto.STRING, onnx.TensorProto.UNDEFINED):
            types[info.name] = np.dtype(helper.tensor_dtype_to_np_dtype(elem))
    return types


class Oracle:
    """Runs a reference model: the one choice of runtime for the whole model and for each node.

    onnxruntime if ``native`` and it loads the model (``model_runner``), else onnx.reference. If
    onnxruntime then fails in a GridSample (a configuration its kernel refuses only at run
    time), that call and every later one run in onnx.reference, and ``notes`` gets a line saying
    why; ``runtime`` is what runs it now. Its other failures, and onnx.reference's, are raised.
    """

    def __init__(
        self,
        model: onnx.ModelProto,
        *,
        native: bool = True,
        threads: int = 0,
        what: str = "the reference",
        notes: list[str] | None = None,
    ) -> None:
        self.model, self.threads, self.what = model, threads, what
        self.notes = [] if notes is None else notes
        self._run, self.runtime = model_runner(model, native=native, threads=threads)

    def __call__(self, feeds: dict) -> list[np.ndarray]:
        try:
            return self._run(feeds)
        except Exception as error:  # noqa: BLE001  (runtimes' errors have many types)
            if self.runtime != "onnxruntime" or "GridSample" not in str(error):
                raise  # only a GridSample it refuses is judged elsewhere: the rest is the model's
            why = one_line(error, tail=True)
        run, runtime = model_runner(self.model, native=False, threads=self.threads)
        outputs = run(feeds)
        self._run, self.runtime = run, runtime
        self.notes.append(f"onnxruntime failed on {self.what} ({why}); onnx.reference ran it")
        return outputs


def _inline_functions(model: onnx.ModelProto) -> onnx.ModelProto:
    """Inline model-local functions (defaults kept): onnx.reference ignores new_ops in them."""
    if not model.functions:
        return model
    inlined = ir.serde.deserialize_model(model)
    InlinePass()(inlined)
    return ir.serde.serialize_model(inlined)


def candidate_runner(
    model: onnx.ModelProto, *, native: bool = True, threads: int = 0
) -> tuple[Runner, str, str]:
    """Runner, runtime, and why no runtime can load ``model`` (then the runner raises that)."""
    try:
        return (*model_runner(model, native=native, threads=threads), "")
    except Exception as error:  # noqa: BLE001  (any failure of the candidate is a finding)
        reason = f"cannot be loaded ({one_line(error, tail=True)})"

    def refuse(feeds: dict) -> list[np.ndarray]:
        raise RuntimeError(reason)

    return refuse, "none", reason
