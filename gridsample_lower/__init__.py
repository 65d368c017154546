"""Lower ONNX GridSample to primitive ops that every runtime has, and prove each rewrite.

Three ways in:

- The command line: ``gridsample-lower lower model.onnx -o lowered.onnx`` (also ``inspect``,
  ``verify``, ``upgrade``, ``downgrade``, ``targets``, ``supported``; ``--help`` on each), or
  ``python -m gridsample_lower``.
- A function: ``gridsample_lower.lower(model, target="openvino")`` takes and returns an
  ``onnx.ModelProto`` or an ``onnx_ir.Model``; ``verify(original, lowered)`` checks it.
- A pass and a rule: ``LowerGridSamplePass(target=...)(ir_model)`` for onnx_ir pass pipelines,
  ``gridsample_rule()`` for ``onnxscript.rewriter.rewrite(model, [gridsample_rule()])``.

Names are imported on first use, so the command line starts without loading onnx or numpy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# Public name -> the module that defines it.
_PUBLIC = {
    "TARGETS": "gridsample_lower.lowering.targets",
    "GridSampleLowering": "gridsample_lower.lowering.rule",
    "GridSampleSpec": "gridsample_lower.spec",
    "LowerGridSamplePass": "gridsample_lower.lowering.passes",
    "LoweringOptions": "gridsample_lower.lowering.options",
    "LoweringResult": "gridsample_lower.lowering.passes",
    "NodeCheck": "gridsample_lower.check",
    "OpsetConversionError": "gridsample_lower.opset",
    "OutputCheck": "gridsample_lower.check",
    "Target": "gridsample_lower.lowering.targets",
    "UnsupportedGridSample": "gridsample_lower.spec",
    "VerificationError": "gridsample_lower.check",
    "VerificationReport": "gridsample_lower.check",
    "VerificationSetupError": "gridsample_lower.check",
    "downgrade": "gridsample_lower.opset",
    "gridsample_rule": "gridsample_lower.lowering.rule",
    "lower": "gridsample_lower.lowering.api",
    "lower_with_report": "gridsample_lower.lowering.api",
    "model_io": "gridsample_lower.files.model_io",  # the module itself
    "supported_specs": "gridsample_lower.lowering.registry",
    "upgrade": "gridsample_lower.opset",
    "verify": "gridsample_lower.check",
}

__all__ = [
    "TARGETS",
    "GridSampleLowering",
    "GridSampleSpec",
    "LowerGridSamplePass",
    "LoweringOptions",
    "LoweringResult",
    "NodeCheck",
    "OpsetConversionError",
    "OutputCheck",
    "Target",
    "UnsupportedGridSample",
    "VerificationError",
    "VerificationReport",
    "VerificationSetupError",
    "__version__",
    "downgrade",
    "gridsample_rule",
    "lower",
    "lower_with_report",
    "model_io",
    "supported_specs",
    "upgrade",
    "verify",
]


def __getattr__(name: str) -> Any:
    if name not in _PUBLIC:
        raise AttributeError(f"module 'gridsample_lower' has no attribute {name!r}")
    module = importlib.import_module(_PUBLIC[name])
    value = module if module.__name__.endswith("." + name) else getattr(module, name)
    globals()[name] = value  # once: later lookups skip this function
    return value


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:  # what type checkers and IDEs read
    from gridsample_lower.check import (
        NodeCheck,
        OutputCheck,
        VerificationError,
        VerificationReport,
        VerificationSetupError,
        verify,
    )
    from gridsample_lower.files import model_io
    from gridsample_lower.lowering.api import lower, lower_with_report
    from gridsample_lower.lowering.options import LoweringOptions
    from gridsample_lower.lowering.passes import LowerGridSamplePass, LoweringResult
    from gridsample_lower.lowering.registry import supported_specs
    from gridsample_lower.lowering.rule import GridSampleLowering, gridsample_rule
    from gridsample_lower.lowering.targets import TARGETS, Target
    from gridsample_lower.opset import OpsetConversionError, downgrade, upgrade
    from gridsample_lower.spec import GridSampleSpec, UnsupportedGridSample
