"""The verifier passes correct rewrites and catches wrong ones."""

from __future__ import annotations

import onnx
from conftest import gridsample_model

from gridsample_lower import lower, verify_lowering


def test_correct_rewrite_passes_against_onnxruntime():
    model = gridsample_model(["N", 2, 5, 6], ["N", 3, 4, 2], "cubic", "reflection", 1)
    result = verify_lowering(model, lower(model), samples=2)
    assert result.ok and result.oracle == "onnxruntime", result.summary()


def test_correct_rewrite_passes_against_the_reference():
    model = gridsample_model([2, 2, 5], [2, 4, 1], "linear", "border", 0)
    result = verify_lowering(model, lower(model))
    assert result.ok and result.oracle == "onnx.reference", result.summary()


def test_wrong_rewrite_is_caught():
    model = gridsample_model([1, 2, 5, 6], [1, 3, 4, 2], "linear", "zeros", 0)
    impostor = lower(gridsample_model([1, 2, 5, 6], [1, 3, 4, 2], "linear", "border", 0))
    result = verify_lowering(model, impostor, samples=2)
    assert not result.ok
    assert "mismatch against onnxruntime in output 'Y'" in result.summary()


def test_shape_or_dtype_change_is_caught():
    model = gridsample_model([1, 2, 5, 6], [1, 3, 4, 2], "nearest", "zeros", 0)
    other = gridsample_model([1, 2, 5, 6], [1, 3, 4, 2], "nearest", "zeros", 0)
    cast = onnx.helper.make_node("Cast", ["Y"], ["Y2"], to=onnx.TensorProto.DOUBLE)
    other.graph.node.append(cast)
    other.graph.output[0].name = "Y2"
    other.graph.output[0].type.tensor_type.elem_type = onnx.TensorProto.DOUBLE
    result = verify_lowering(model, other)
    assert not result.ok and "expected float32" in result.summary()
