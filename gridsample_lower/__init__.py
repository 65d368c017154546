"""Lower ONNX GridSample to primitive ops that every runtime has."""

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

__version__ = "0.1.0"
