"""One decomposition per mode; importing this package registers them all."""

from gridsample_lower.lowering.decompositions import cubic, linear, nearest

__all__ = ["cubic", "linear", "nearest"]
