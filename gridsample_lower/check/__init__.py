"""The numerical check: does a rewritten model compute what the original computes?

``verify`` runs both models (or, where the whole model cannot run, each GridSample alone) and
compares; ``inputs`` and ``dims`` invent what is not given; ``nodes`` isolates each GridSample
and ``oracle`` chooses what judges it; ``reference`` holds the numpy kernels the oracle runs
where onnxruntime cannot; ``report``, ``bounds`` and ``tolerances`` say how close is close.
"""

from gridsample_lower.check.given import VerificationSetupError, load_inputs
from gridsample_lower.check.report import NodeCheck, OutputCheck, VerificationReport
from gridsample_lower.check.verify import VerificationError, verify

__all__ = [
    "NodeCheck",
    "OutputCheck",
    "VerificationError",
    "VerificationReport",
    "VerificationSetupError",
    "load_inputs",
    "verify",
]
