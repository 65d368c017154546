"""The real-model corpus: exported models, lowered for every target, run, compared with PyTorch.

testdata/corpus holds real architectures in tiny configurations (RAFT, RT-DETR, Deformable
DETR, Mask2Former's pixel decoder, GLM-4V's cubic position embedding, kornia's warps, an STN in
float32 and float16), each exported by TorchScript and by dynamo, with their inputs and
PyTorch's outputs (``testdata/corpus/make_corpus.py`` wrote them; no torch is needed here).
Each model is lowered as ``gridsample-lower lower`` does by default (generic target, checked),
and for every target without the check; the results run in onnxruntime and, for the targets
meant for it, in OpenVINO (float32), and must give PyTorch's outputs.

The expected outputs are PyTorch's, except where the manifest says the export departs from
PyTorch (the float16 STN: its transform is computed in float16, which PyTorch's CPU kernels and
onnxruntime's round differently, 3.9e-2 of the output's scale apart): there they are onnxruntime's
run of the original (its float16 GridSample spelled out in float32), and in OpenVINO, which
computes float16 models in float32 at this precision hint, OpenVINO's run of the original.

Tolerance, per output: ``max |actual - expected| <= rtol * max |expected|``, rtol from the
manifest: 1e-4 for float32 (the exports depart from PyTorch by at most 6e-6 of that scale, and
each lowered GridSample by its float32 tolerance, 5e-5 of its values, which the layers after it
carry on), 3e-3 for float16 (lowered models run in onnxruntime: 6e-4). A 1% error in every
GridSample's output moves every model's outputs by 2.9e-3 to 1.1e-2 of their scale: each
tolerance catches it. Targets' models run in onnxruntime with its graph optimisations off
(sessions start 4x faster); the default lowering runs with them on.
"""

from __future__ import annotations

import functools
import json
import pathlib

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest

from gridsample_lower import UnsupportedGridSample, lower, verify
from gridsample_lower.lowering import costs
from gridsample_lower.lowering.passes import LowerGridSamplePass
from gridsample_lower.lowering.targets import TARGETS, Target
from gridsample_lower.runtime import onnxruntime_runner

CORPUS = pathlib.Path(__file__).parents[1] / "testdata" / "corpus"
MANIFEST = json.loads((CORPUS / "manifest.json").read_text())["models"]
NAMES = sorted(MANIFEST)
# Targets that keep some GridSample natively: also lowered with lower_all, so nothing is kept.
_KEEPS_NOTHING = Target.__dataclass_fields__["keeps"].default
VARIANTS = [(name, False) for name in TARGETS] + [
    (name, True) for name, target in TARGETS.items() if target.keeps is not _KEEPS_NOTHING
]
OPENVINO_TARGETS = {"generic", "openvino"}


def _variant_id(variant):
    target, lower_all = variant
    return f"{target}-all" if lower_all else target


@functools.cache
def _original(name: str) -> onnx.ModelProto:
    return onnx.load(str(CORPUS / f"{name}.onnx"))


@functools.cache
def _arrays(name: str) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The inputs, and the expected outputs (PyTorch's, or where it says, onnxruntime's)."""
    model = _original(name)
    with np.load(CORPUS / f"{name}.npz") as data:
        arrays = dict(data)
    inputs = {v.name: arrays[v.name] for v in model.graph.input}
    prefix = "onnxruntime:" if MANIFEST[name]["expected_from"] == "onnxruntime" else ""
    expected = {v.name: arrays[prefix + v.name] for v in model.graph.output}
    return inputs, expected


@functools.cache
def _lowered(name: str, target: str, lower_all: bool) -> onnx.ModelProto:
    return lower(_original(name), target=target, lower_all=lower_all)


def _count(model: onnx.ModelProto) -> int:
    return sum(node.op_type == "GridSample" for node in model.graph.node)


# What a target whose own GridSample reads the taps (MNN, ncnn) may leave: the forms those
# kernels compute right, nearest at pixel centres and linear with zeros or border padding.
_READER_FORMS = {
    (m, p) for m in (b"linear", b"bilinear", b"nearest") for p in (b"zeros", b"border")
}
# Why ncnn refuses a node (it reads only through its GridSample): pnnx converts at fixed sizes,
# and its kernel samples in X's float32.
NCNN_REFUSALS = ("symbolic spatial sizes", "float16 X", "a double grid on float X")


def _forms(model: onnx.ModelProto) -> set[tuple[bytes, bytes]]:
    """(mode, padding) of each GridSample (defaults: linear/bilinear, zeros)."""
    forms = set()
    for node in model.graph.node:
        if node.op_type == "GridSample":
            attrs = {a.name: a.s for a in node.attribute}
            forms.add((attrs.get("mode", b"linear"), attrs.get("padding_mode", b"zeros")))
    return forms


def _assert_matches(name: str, outputs: list[np.ndarray], where: str, expected=None) -> None:
    if expected is None:
        expected = _arrays(name)[1]
    rtol = MANIFEST[name]["rtol"]
    assert len(outputs) == len(expected), where
    for (output, want), got in zip(expected.items(), outputs, strict=True):
        assert got.shape == want.shape and got.dtype == want.dtype, (where, output)
        scale = float(np.max(np.abs(want.astype(np.float64))))
        error = float(np.max(np.abs(got.astype(np.float64) - want)))
        assert error <= rtol * scale, (
            f"{name} {where}: {output} off by {error:.3g}, {error / scale:.3g} of its scale "
            f"{scale:.3g} (tolerance {rtol:g})"
        )


def _run_ort(model: onnx.ModelProto, inputs: dict, *, optimized: bool = True) -> list[np.ndarray]:
    """Run in onnxruntime, 1 thread; ``optimized=False`` skips its graph optimisations.

    The targets' models run unoptimized: a session on a lowered Deformable DETR starts in
    0.19 s without them, 0.88 s with all (the default lowering runs optimized).
    """
    if optimized:
        return onnxruntime_runner(model, threads=1)(inputs)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.intra_op_num_threads = 1
    options.log_severity_level = 4
    session = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    return session.run(None, inputs)


def _run_openvino(
    model: onnx.ModelProto, inputs: dict, default: bool = False, reshaped: bool = False
) -> list[np.ndarray]:
    """Run in OpenVINO's CPU plugin, 1 thread, float32.

    ``default``: at its default precision instead (bfloat16 between kernels here).
    ``reshaped``: the model reshaped to the inputs' sizes first (static: fused kernels), as
    ``lower --target openvino`` advises for symbolic sizes, which OpenVINO runs op by op.
    """
    ov = pytest.importorskip("openvino")
    core = ov.Core()
    config = {"INFERENCE_NUM_THREADS": 1}
    read = core.read_model(model.SerializeToString(), b"")
    if reshaped:
        read.reshape({i.get_any_name(): list(inputs[i.get_any_name()].shape) for i in read.inputs})
    if not default:
        config["INFERENCE_PRECISION_HINT"] = "f32"
    compiled = core.compile_model(read, "CPU", config)
    result = compiled(inputs)
    return [result[output] for output in compiled.outputs]


def test_manifest_describes_the_files():
    """Every record names a file that is there, under the size limits, as described."""
    total = 0
    for name, record in MANIFEST.items():
        model = _original(name)
        assert _count(model) == record["gridsample"] > 0, name
        assert model.ir_version <= 10, name
        sizes = [(CORPUS / f"{name}{suffix}").stat().st_size for suffix in (".onnx", ".npz")]
        assert sizes == [record["bytes"], record["npz_bytes"]], name
        assert sizes[0] < 2 * 2**20, name
        total += sum(sizes)
        inputs, expected = _arrays(name)
        assert {k: list(v.shape) for k, v in inputs.items()} == record["inputs"], name
    assert total < 15 * 2**20
    assert {r["exporter"] for r in MANIFEST.values()} == {"torchscript", "dynamo"}


@pytest.mark.parametrize("name", NAMES)
def test_default_lowering_is_checked_and_gives_pytorchs_outputs(name):
    """``gridsample-lower lower`` with no options: the generic target, then the check."""
    model = _original(name)
    lowered = _lowered(name, "generic", False)
    assert _count(lowered) == 0
    report = verify(model, lowered)
    assert report.ok, report.table()
    inputs, _ = _arrays(name)
    _assert_matches(name, _run_ort(lowered, inputs), "generic, onnxruntime")


@pytest.mark.parametrize("variant", VARIANTS, ids=_variant_id)
@pytest.mark.parametrize("name", NAMES)
def test_every_target_runs_in_onnxruntime(name, variant):
    target, lower_all = variant
    try:
        lowered = _lowered(name, target, lower_all)
    except UnsupportedGridSample as error:  # ncnn: what pnnx and its kernel cannot take
        assert TARGETS[target].reads_only and any(r in str(error) for r in NCNN_REFUSALS), error
        return
    if TARGETS[target].centre_reader_ranks:  # MNN's and ncnn's own GridSample read the taps
        assert _forms(lowered) <= _READER_FORMS, _forms(lowered)
    elif lower_all or TARGETS[target].keeps is _KEEPS_NOTHING:
        assert _count(lowered) == 0
    readers = bool(TARGETS[target].centre_reader_ranks)  # (as many GridSamples, new ones)
    if _count(lowered) == _count(_original(name)) and not readers:
        # The target keeps every GridSample: the model is left as it was, nothing new to run.
        assert len(lowered.graph.node) == len(_original(name).graph.node)
        return
    inputs, _ = _arrays(name)
    try:
        outputs = _run_ort(lowered, inputs, optimized=False)
    except Exception as error:  # onnxruntime refuses what it cannot run
        if _count(lowered) == 0:
            raise
        try:
            _run_ort(_original(name), inputs, optimized=False)
        except Exception:
            pytest.skip(f"onnxruntime cannot run the GridSample kept, nor the original: {error}")
        raise
    _assert_matches(name, outputs, f"{_variant_id(variant)}, onnxruntime")


@pytest.mark.parametrize(
    "variant", [v for v in VARIANTS if v[0] in OPENVINO_TARGETS], ids=_variant_id
)
@pytest.mark.parametrize("name", NAMES)
def test_openvino_runs_what_its_targets_lower(name, variant):
    target, lower_all = variant
    lowered = _lowered(name, target, lower_all)
    if _count(lowered) == _count(_original(name)):
        # OpenVINO runs every GridSample here: the target leaves the model as it was.
        assert len(lowered.graph.node) == len(_original(name).graph.node)
        return
    inputs, expected = _arrays(name)
    if MANIFEST[name]["expected_from"] == "onnxruntime":
        # The export departs from PyTorch (RT-DETR's TopK ties, float16 STN): OpenVINO's own
        # run of the original is what the lowered model must give there (OpenVINO breaks
        # RT-DETR's ties otherwise than onnxruntime).
        if not _openvino_original_error(name):
            expected = dict(zip(expected, _openvino_original(name), strict=True))
    try:
        outputs = _run_openvino(lowered, inputs)
    except RuntimeError as error:
        # OpenVINO refuses an op the lowering leaves alone (the float16 STN's AffineGrid-20):
        # skip only where it refuses the original for the same op.
        refused = _openvino_refusal(str(error))
        if refused is None or refused != _openvino_refusal(_openvino_original_error(name)):
            raise
        pytest.skip(f"OpenVINO refuses the original too: {refused}")
    _assert_matches(name, outputs, f"{_variant_id(variant)}, OpenVINO f32", expected)
    # Reshaped to the inputs' sizes, as `lower --target openvino` advises: OpenVINO folds the
    # model then (RAFT's first lookup reads a grid of constants), a compile the lowering must
    # not break (OpenVINO 2026.4 failed on an If's masked branch with the grid's axes merged).
    outputs = _run_openvino(lowered, inputs, reshaped=True)
    _assert_matches(name, outputs, f"{_variant_id(variant)}, OpenVINO f32 reshaped", expected)


def _openvino_refusal(message: str) -> str | None:
    """The op OpenVINO's ONNX frontend names when it cannot convert a model."""
    lines = [line for line in message.splitlines() if line.startswith("-- ")]
    return lines[-1].removeprefix("-- ") if lines else None


@functools.cache
def _openvino_original_error(name: str) -> str:
    try:
        _openvino_original(name)
    except RuntimeError as error:
        return str(error)
    return ""


@functools.cache
def _openvino_original(name: str) -> list[np.ndarray]:
    return _run_openvino(_original(name), _arrays(name)[0])


def _scaled_gridsamples(model: onnx.ModelProto, factor: float) -> onnx.ModelProto:
    """The original with every GridSample's output scaled by ``factor`` (and a double grid of
    float X cast to float, so that onnxruntime runs it)."""
    mutant = onnx.ModelProto()
    mutant.CopyFrom(model)
    nodes = []
    for k, node in enumerate(mutant.graph.node):
        if node.op_type != "GridSample":
            nodes.append(node)
            continue
        output = node.output[0]
        node.output[0] = f"{output}__unscaled"
        cast_grid = f"{node.input[1]}__like_x_{k}"
        nodes.append(onnx.helper.make_node("CastLike", [node.input[1], node.input[0]], [cast_grid]))
        node.input[1] = cast_grid
        nodes.append(node)
        factor_name = f"{output}__factor"
        nodes.append(
            onnx.helper.make_node(
                "Constant",
                [],
                [factor_name + "_f32"],
                value=onnx.helper.make_tensor(factor_name, onnx.TensorProto.FLOAT, [], [factor]),
            )
        )
        nodes.append(
            onnx.helper.make_node(
                "CastLike", [factor_name + "_f32", output + "__unscaled"], [factor_name]
            )
        )
        nodes.append(onnx.helper.make_node("Mul", [output + "__unscaled", factor_name], [output]))
    del mutant.graph.node[:]
    mutant.graph.node.extend(nodes)
    return mutant


@pytest.mark.parametrize("name", NAMES)
def test_a_one_percent_error_in_gridsample_is_caught(name):
    """The comparison can fail: every model's outputs depend on its GridSamples enough."""
    inputs, _ = _arrays(name)
    outputs = _run_ort(_scaled_gridsamples(_original(name), 1.01), inputs, optimized=False)
    with pytest.raises(AssertionError, match="off by"):
        _assert_matches(name, outputs, "GridSample outputs scaled by 1.01")


@pytest.mark.parametrize(
    "name",
    [
        n
        for n in NAMES
        if any("grid float64" in k and "X float32" in k for k in MANIFEST[n]["gridsample_kinds"])
    ],
)
def test_onnxruntime_runs_a_double_grid_only_lowered(name):
    """TorchScript's static Deformable DETR and Mask2Former: float X with a double grid."""
    with pytest.raises(Exception, match="GridSample"):
        _run_ort(_original(name), _arrays(name)[0], optimized=False)
    lowered = _lowered(name, "onnxruntime", False)  # what onnxruntime cannot run is lowered
    _assert_matches(name, _run_ort(lowered, _arrays(name)[0]), "onnxruntime target, onnxruntime")


# The models with multi-scale deformable attention, and their feature levels.
DEFORMABLE_ATTENTION = {"deformable_detr": 4, "rt_detr": 3, "mask2former_pixel_decoder": 3}
ATTENTION_MODELS = [n for n in NAMES if MANIFEST[n]["model"] in DEFORMABLE_ATTENTION]


@pytest.mark.parametrize("name", ATTENTION_MODELS)
def test_deformable_attention_is_lowered_as_one_unit_and_checked_so(name):
    """The onnxruntime target fuses every attention of both exporters; the check names each."""
    model = ir.serde.deserialize_model(_original(name))
    result = LowerGridSamplePass(target="onnxruntime")(model)
    fused = [g for members in result.attentions.values() for g in members]
    assert len(fused) == MANIFEST[name]["gridsample"]
    assert (
        len(result.attentions)
        == MANIFEST[name]["gridsample"] // DEFORMABLE_ATTENTION[MANIFEST[name]["model"]]
    )
    lowered = ir.serde.serialize_model(result.model)
    report = verify(_original(name), lowered, samples=1)
    assert report.ok, report.table()
    assert sorted(c.name for c in report.nodes if c.members and c.checked) == sorted(
        result.attentions
    )
    inputs, _ = _arrays(name)
    _assert_matches(name, _run_ort(lowered, inputs), "onnxruntime target, one unit, onnxruntime")


@pytest.mark.parametrize("name", ATTENTION_MODELS)
def test_the_openvino_target_fuses_static_attentions_erring_as_native_by_default(name):
    """The openvino target fuses the attentions whose levels have static sizes (their planes'
    tap positions exact in bfloat16; the batch may be symbolic), checked; at OpenVINO's
    default precision (bfloat16 between kernels here), as exported and reshaped to static
    sizes, the model errs from PyTorch at most twice the original plus 1e-3 (as exported,
    Deformable DETR's TorchScript export erred by 0.019, native 0.002, unfenced)."""
    original = _original(name)
    shapes = onnx.shape_inference.infer_shapes(original, data_prop=True)
    known = {
        v.name: v.type.tensor_type.shape for v in [*shapes.graph.value_info, *shapes.graph.input]
    }
    levels = [known.get(n.input[0]) for n in shapes.graph.node if n.op_type == "GridSample"]
    static = all(s is not None and all(d.HasField("dim_value") for d in s.dim[2:]) for s in levels)
    result = LowerGridSamplePass(target="openvino")(ir.serde.deserialize_model(original))
    assert bool(result.attentions) == static
    if not static:
        return
    lowered = ir.serde.serialize_model(result.model)
    report = verify(original, lowered, samples=1)
    assert report.ok, report.table()
    _assert_errs_as_native_by_default(name, original, lowered)


@pytest.mark.parametrize("name", [n for n in NAMES if n not in ATTENTION_MODELS])
def test_the_openvino_target_errs_as_native_by_default(name):
    """Every other model, every GridSample lowered with the openvino target, at OpenVINO's
    default precision (bfloat16 between kernels here), as exported and reshaped to static
    sizes: at most twice the original's error from PyTorch plus 1e-3, as issue 24 asks. As
    exported, the STNs erred by 0.32-0.34 (native 0.15) before their lowering ran in a Loop's
    body, kept in float32 (``plan.fenced``)."""
    refused = _openvino_refusal(_openvino_original_error(name))
    if refused:
        pytest.skip(f"OpenVINO refuses the original: {refused}")
    _assert_errs_as_native_by_default(name, _original(name), _lowered(name, "openvino", True))


def _assert_errs_as_native_by_default(name, original, lowered):
    """As exported (symbolic sizes run op by op: ``plan.fenced``) and reshaped to static."""
    inputs, expected = _arrays(name)
    for reshaped in (False, True):
        for output, native, got in zip(
            expected.values(),
            _run_openvino(original, inputs, default=True, reshaped=reshaped),
            _run_openvino(lowered, inputs, default=True, reshaped=reshaped),
            strict=True,
        ):
            native_error = float(np.max(np.abs(native - output)))
            error = float(np.max(np.abs(got - output)))
            assert error <= 2 * native_error + 1e-3, (name, reshaped, error, native_error)


@pytest.mark.parametrize("name", NAMES)
def test_tiles_run_at_the_corpus_sizes_and_give_pytorchs_outputs(name, monkeypatch):
    """The onnxruntime target with tiles of a few points and queries (``costs.point_tiles``,
    ``costs.attention_tiles``), as it cuts a deployment-size model, at the corpus' own sizes:
    checked, and PyTorch's outputs (a Deformable DETR export whose attention weights carry no
    type once failed to serialize so)."""
    for least in ("POINT_TILES_FROM", "CUBIC_TILES_FROM", "NEAREST_TILES_FROM"):
        monkeypatch.setattr(costs, least, 64)
    for tile in ("POINT_TILE", "CUBIC_POINT_TILE", "NEAREST_POINT_TILE"):
        monkeypatch.setattr(costs, tile, 32)
    monkeypatch.setattr(costs, "TILE_MIN_SAMPLE_POINTS", 8)
    monkeypatch.setattr(costs, "ATTENTION_TILE_ROWS", 2**11)
    lowered = lower(_original(name), target="onnxruntime", lower_all=True)
    assert "Slice" in {n.op_type for n in lowered.graph.node} | {
        inner.op_type
        for node in lowered.graph.node
        for attribute in node.attribute
        for inner in attribute.g.node
    }
    report = verify(_original(name), lowered, samples=1)
    assert report.ok, report.table()
    inputs, _ = _arrays(name)
    _assert_matches(name, _run_ort(lowered, inputs), "onnxruntime target in tiles, onnxruntime")
