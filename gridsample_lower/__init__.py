"""Lower ONNX GridSample to primitive ops that every runtime has."""

from gridsample_lower.passes import LowerGridSamplePass, LoweringResult, lower, lower_with_report
from gridsample_lower.registry import supported_specs
from gridsample_lower.rule import GridSampleLowering, gridsample_rule
from gridsample_lower.spec import GridSampleSpec, UnsupportedGridSample
from gridsample_lower.verify import VerificationError, verify_lowering

__all__ = [
    "GridSampleLowering",
    "GridSampleSpec",
    "LowerGridSamplePass",
    "LoweringResult",
    "UnsupportedGridSample",
    "VerificationError",
    "__version__",
    "gridsample_rule",
    "lower",
    "lower_with_report",
    "supported_specs",
    "verify_lowering",
]

__version__ = "0.1.0"
