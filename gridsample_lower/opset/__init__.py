"""Opset conversion: GridSample respelled for opset 16-19 or 20+, nothing else of the model lost.

``convert`` holds ``upgrade`` and ``downgrade``; ``onnx_converter`` runs onnx's version converter
on the rest of the model and puts back what it drops.
"""

from gridsample_lower.opset.convert import downgrade, upgrade
from gridsample_lower.opset.onnx_converter import OpsetConversionError

__all__ = ["OpsetConversionError", "downgrade", "upgrade"]
