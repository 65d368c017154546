"""Rebuild the real-model corpus (seeded): ``python testdata/corpus/make_corpus.py [NAME ...]``.

Needs ``pip install -e ".[models]"`` (torch, torchvision, transformers, kornia, onnxscript).

Each model is a real architecture in a tiny configuration with random weights (nothing is
downloaded), exported twice where the exporter manages: TorchScript (``dynamo=False``) at
opset 17 and dynamo at opset 20, with dynamic batch and image sizes where the exporter keeps
them. For each export this writes ``<name>.onnx``, ``<name>.npz`` (the inputs, and the expected
outputs under the graph's input and output names) and a record in ``manifest.json``.

The expected outputs are PyTorch's. Before a file is written, the export is run in onnxruntime
and compared with PyTorch at the export's sizes and, for a dynamic export, at a second set of
sizes (where onnxruntime cannot run a GridSample with a double grid and float X, on a copy whose
grid is cast to float, and a float16 GridSample on a copy that spells it out in float32; for
this check only). A dynamic export that is wrong at other sizes is exported again with fewer
dynamic axes (batch only, then none). An export that departs from PyTorch at its own sizes
gets onnxruntime's run of the original as its expected outputs too (``onnxruntime:<output>``);
the manifest says so and by how much. Where a static export types its GridSamples otherwise
than the dynamic one (TorchScript's Deformable DETR and Mask2Former: a double grid with float X,
which onnxruntime cannot run), it is written too, as ``<name>_static``. Per-node metadata
(dynamo's stack traces, up to 70% of a file) is stripped; nothing else is changed.

``--deploy`` exports again, at its deployment size (``DEPLOY_INPUTS``, the sizes of
bench/models.py's ``DEPLOY``) and with the same dynamic axes, each export whose sizes are fixed
(the detectors, RAFT and the STN by dynamo; TorchScript's with a fixed image size), checked
against PyTorch there, into ``deploy/`` beside this file: ``bench/models.py --size deploy``
times those. They are not part of the corpus and not committed (2.4 MB for one of them).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
import sys
import tempfile
import warnings
from collections.abc import Callable

import numpy as np
import onnx
import onnxruntime as ort
import torch
from runnable import runnable, value_types  # (beside this file)
from torch import nn
from torch.nn import functional as F  # noqa: N812

HERE = pathlib.Path(__file__).parent
SEED = 0
MAX_FILE_BYTES = 2 * 2**20
MAX_CORPUS_BYTES = 15 * 2**20
EXPORTERS = {"torchscript": 17, "dynamo": 20}


@dataclasses.dataclass
class Case:
    """One model: how to build it, its inputs at two sizes, which axes may vary."""

    name: str
    build: Callable[[], nn.Module]
    # inputs(size_set, generator) -> tuple of tensors; size_set 0 is the export's, 1 another
    inputs: Callable[[int, torch.Generator], tuple[torch.Tensor, ...]]
    input_names: list[str]
    output_names: list[str]
    dynamic: dict[str, dict[int, str]]  # input name -> {axis: symbol}
    # float32 comparison with PyTorch: max |error| / max |expected| per output
    rtol: float = 1e-4
    notes: list[str] = dataclasses.field(default_factory=list)


def _randomize(module: nn.Module, names: tuple[str, ...], std: float) -> None:
    """Give deformable attention's zero-initialised layers random weights.

    Deformable DETR-style attention starts its sampling offsets from a fixed pattern (weights
    0) and its attention weights from 0, so every sample point would sit at a fixed offset from
    its reference point whatever the input; random weights make the grid depend on the input.
    """
    for path, sub in module.named_modules():
        if isinstance(sub, nn.Linear) and path.rsplit(".", 1)[-1] in names:
            with torch.no_grad():
                sub.weight.normal_(0.0, std)


def _image(g: torch.Generator, *shape: int, dtype=torch.float32) -> torch.Tensor:
    """Uniform noise in [-1, 1]: what detectors and flow networks see here."""
    return torch.rand(*shape, generator=g).mul(2).sub(1).to(dtype)


def _smooth(g: torch.Generator, *shape: int, dtype=torch.float32) -> torch.Tensor:
    """A smooth image (coarse noise, upsampled, plus a little fine noise) for the warps.

    Warping noise makes an output pixel swing with any error in where it samples: a float16
    STN, whose transform is computed in float16, then departs from itself in float32 by 3% of
    its output's scale. Images have structure; a warp of one is what these models deploy for.
    """
    n, c, *sizes = shape
    coarse = torch.randn(n, c, *[max(2, s // 8) for s in sizes], generator=g)
    mode = "bilinear" if len(sizes) == 2 else "trilinear"
    image = F.interpolate(coarse, size=sizes, mode=mode, align_corners=False)
    return (image + 0.05 * torch.randn(*shape, generator=g)).to(dtype)


# ---------------------------------------------------------------------------------------------
# The models


class RaftFlow(nn.Module):
    """torchvision's RAFT (small's architecture, narrower), the last of its flow updates."""

    def __init__(self, updates: int = 2):
        super().__init__()
        from torchvision.models.optical_flow import raft

        self.updates = updates
        self.raft = raft._raft(
            weights=None,
            progress=False,
            feature_encoder_layers=(16, 16, 24, 32, 48),
            feature_encoder_block=raft.BottleneckBlock,
            feature_encoder_norm_layer=nn.InstanceNorm2d,
            context_encoder_layers=(16, 16, 24, 32, 64),
            context_encoder_block=raft.BottleneckBlock,
            context_encoder_norm_layer=None,
            corr_block_num_levels=4,
            corr_block_radius=3,
            motion_encoder_corr_layers=(48,),
            motion_encoder_flow_layers=(32, 16),
            motion_encoder_out_channels=30,
            recurrent_block_hidden_state_size=32,
            recurrent_block_kernel_size=(3,),
            recurrent_block_padding=(1,),
            flow_head_hidden_size=48,
            use_mask_predictor=False,
        )

    def forward(self, image1, image2):
        return self.raft(image1, image2, num_flow_updates=self.updates)[-1]


def _raft_inputs(size_set, g):
    n, h, w = [(1, 128, 128), (2, 128, 192)][size_set]
    return _image(g, n, 3, h, w), _image(g, n, 3, h, w)


def _resnet_backbone(out_features: list[str]):
    from transformers import ResNetConfig

    return ResNetConfig(
        embedding_size=8,
        hidden_sizes=[8, 16, 24, 32],
        depths=[1, 1, 1, 1],
        layer_type="basic",
        out_features=out_features,
    )


class DetectionOutputs(nn.Module):
    """A transformers detector returning (logits, pred_boxes)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, pixel_values):
        out = self.model(pixel_values=pixel_values)
        return out.logits, out.pred_boxes


def _rt_detr():
    from transformers import RTDetrConfig, RTDetrForObjectDetection

    config = RTDetrConfig(
        backbone_config=_resnet_backbone(["stage2", "stage3", "stage4"]),
        use_pretrained_backbone=False,
        use_timm_backbone=False,
        encoder_hidden_dim=16,
        encoder_in_channels=[16, 24, 32],
        encoder_ffn_dim=32,
        encoder_attention_heads=2,
        hidden_expansion=0.5,
        d_model=32,
        num_queries=20,
        decoder_in_channels=[16, 16, 16],
        decoder_ffn_dim=64,
        decoder_layers=1,
        decoder_attention_heads=2,
        decoder_n_points=4,
        num_labels=5,
    )
    model = RTDetrForObjectDetection(config)
    # RT-DETR's own initialisation (normal, std 0.01, batch norms' scales included) shrinks
    # activations to 1e-11 by the encoder's end: the decoder's GridSamples sampled zeros, and
    # a LayerNorm blew the rounding noise up into its scores. PyTorch's default initialisation.
    for module in model.modules():
        if isinstance(module, (nn.Linear, nn.Conv2d, nn.BatchNorm2d, nn.LayerNorm)):
            module.reset_parameters()
    _randomize(model, ("sampling_offsets", "attention_weights"), 0.1)
    return DetectionOutputs(model)


def _deformable_detr():
    from transformers import DeformableDetrConfig, DeformableDetrForObjectDetection

    config = DeformableDetrConfig(
        backbone_config=_resnet_backbone(["stage2", "stage3", "stage4"]),
        use_pretrained_backbone=False,
        use_timm_backbone=False,
        d_model=32,
        encoder_layers=1,
        decoder_layers=2,  # 1 fails in transformers 5.24 (its bbox_embed weight tying)
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        num_queries=20,
        num_feature_levels=4,
        num_labels=5,
        disable_custom_kernels=True,
    )
    model = DeformableDetrForObjectDetection(config)
    _randomize(model, ("sampling_offsets", "attention_weights"), 0.1)
    return DetectionOutputs(model)


def _detr_inputs(size_set, g):
    n, h, w = [(1, 96, 96), (2, 128, 96)][size_set]
    return (_image(g, n, 3, h, w),)


class Mask2FormerPixelLevel(nn.Module):
    """Mask2Former's backbone and pixel decoder (its multi-scale deformable encoder)."""

    def __init__(self):
        super().__init__()
        from transformers import Mask2FormerConfig, Mask2FormerModel

        config = Mask2FormerConfig(
            backbone_config=_resnet_backbone(["stage1", "stage2", "stage3", "stage4"]),
            use_pretrained_backbone=False,
            use_timm_backbone=False,
            feature_size=32,
            mask_feature_size=32,
            hidden_dim=32,
            encoder_feedforward_dim=64,
            encoder_layers=1,
            decoder_layers=1,
            num_attention_heads=2,
            dim_feedforward=64,
            num_queries=10,
            num_labels=5,
        )
        model = Mask2FormerModel(config)
        _randomize(model, ("sampling_offsets", "attention_weights"), 0.1)
        self.pixel_level = model.pixel_level_module

    def forward(self, pixel_values):
        out = self.pixel_level(pixel_values)
        return (out.decoder_last_hidden_state, *out.decoder_hidden_states)


def _glm4v():
    from transformers.models.glm4v.configuration_glm4v import Glm4vVisionConfig
    from transformers.models.glm4v.modeling_glm4v import Glm4vVisionEmbeddings

    config = Glm4vVisionConfig(hidden_size=32, image_size=112, patch_size=14)
    module = Glm4vVisionEmbeddings(config)
    nn.init.normal_(module.position_embedding.weight)
    return module


def _glm4v_inputs(size_set, g):
    """Patch embeddings of images of (h, w) patches, with the coordinates GLM-4V gives them."""
    sizes = [[(6, 10), (12, 8)], [(4, 4), (10, 14), (8, 6)]][size_set]
    h_coords, w_coords, lengths, shapes = [], [], [], []
    for h, w in sizes:
        hh, ww = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
        h_coords.append(hh.reshape(-1))
        w_coords.append(ww.reshape(-1))
        lengths.append(h * w)
        shapes.append((1, h, w))
    total = sum(lengths)
    return (
        torch.randn(total, 32, generator=g),
        torch.tensor(lengths, dtype=torch.int64),
        torch.tensor(shapes, dtype=torch.int64),
        torch.cat(h_coords),
        torch.cat(w_coords),
    )


class KorniaWarpPerspective(nn.Module):
    """kornia's warp_perspective: a homography per image (linear, zeros)."""

    def forward(self, image, homography):
        from kornia.geometry.transform import warp_perspective

        return warp_perspective(image, homography, (48, 64))


class KorniaWarpAffine(nn.Module):
    """kornia's warp_affine, cubic with reflection: affine_grid and grid_sample."""

    def forward(self, image, matrix):
        from kornia.geometry.transform import warp_affine

        return warp_affine(image, matrix, (40, 56), mode="bicubic", padding_mode="reflection")


class KorniaRemap(nn.Module):
    """kornia's remap: a pixel map per image (nearest, border)."""

    def forward(self, image, map_x, map_y):
        from kornia.geometry.transform import remap

        return remap(
            image, map_x, map_y, mode="nearest", padding_mode="border", align_corners=False
        )


class KorniaWarpAffine3d(nn.Module):
    """kornia's warp_affine3d: a 3-D affine transform of a volume (5-D)."""

    def forward(self, volume, matrix):
        from kornia.geometry.transform import warp_affine3d

        return warp_affine3d(volume, matrix, (12, 16, 20))


def _affine(g, n, rows):
    """Near-identity transforms: rotation, scale, shear and shift of a few pixels."""
    eye = torch.eye(rows + 1)[:rows].expand(n, rows, rows + 1)
    return eye + 0.15 * torch.randn(n, rows, rows + 1, generator=g) * torch.tensor(
        [1.0] * rows + [20.0]
    )


def _perspective_inputs(size_set, g):
    n, h, w = [(2, 48, 64), (3, 40, 72)][size_set]
    homography = torch.cat([_affine(g, n, 2), torch.tensor([[[0.0, 0.0, 1.0]]]).repeat(n, 1, 1)], 1)
    homography[:, 2, :2] = 1e-3 * torch.randn(n, 2, generator=g)
    return _smooth(g, n, 3, h, w), homography


def _affine_inputs(size_set, g):
    n, h, w = [(2, 40, 56), (1, 64, 48)][size_set]
    return _smooth(g, n, 3, h, w), _affine(g, n, 2)


def _remap_inputs(size_set, g):
    n, h, w = [(2, 48, 64), (1, 40, 56)][size_set]
    ys, xs = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
    wobble = 3 * torch.sin(ys.float() / 5)[None]
    map_x = (xs.float() + wobble + torch.randn(n, h, w, generator=g)).contiguous()
    map_y = (ys.float() - wobble + torch.randn(n, h, w, generator=g)).contiguous()
    return _smooth(g, n, 3, h, w), map_x, map_y


def _affine3d_inputs(size_set, g):
    n, d, h, w = [(1, 12, 16, 20), (2, 10, 12, 16)][size_set]
    return _smooth(g, n, 2, d, h, w), _affine(g, n, 3)


class SpatialTransformer(nn.Module):
    """The classic STN: a localisation net predicts an affine transform that warps the input."""

    def __init__(self):
        super().__init__()
        self.localization = nn.Sequential(
            nn.Conv2d(3, 8, 5, stride=2, padding=2),
            nn.ReLU(),
            nn.Conv2d(8, 16, 3, stride=2, padding=1),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
        )
        self.theta = nn.Linear(16, 6)
        with torch.no_grad():
            self.theta.weight.mul_(0.5)
            self.theta.bias.copy_(torch.tensor([1.0, 0.0, 0.0, 0.0, 1.0, 0.0]))
        self.head = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, image):
        theta = self.theta(self.localization(image)).view(-1, 2, 3)
        grid = F.affine_grid(theta, list(image.shape), align_corners=False)
        warped = F.grid_sample(image, grid, align_corners=False)
        return self.head(warped)


def _stn_inputs(dtype):
    def inputs(size_set, g):
        n, h, w = [(2, 64, 64), (3, 48, 80)][size_set]
        return (_smooth(g, n, 3, h, w, dtype=dtype),)

    return inputs


def _stn_half():
    return SpatialTransformer().half()


CASES = [
    Case(
        "raft_small",
        RaftFlow,
        _raft_inputs,
        ["image1", "image2"],
        ["flow"],
        {n: {0: "batch", 2: "height", 3: "width"} for n in ("image1", "image2")},
        notes=["torchvision raft_small's layout with narrower layers, 2 flow updates"],
    ),
    Case(
        "rt_detr",
        _rt_detr,
        _detr_inputs,
        ["pixel_values"],
        ["logits", "pred_boxes"],
        {"pixel_values": {0: "batch", 2: "height", 3: "width"}},
    ),
    Case(
        "deformable_detr",
        _deformable_detr,
        _detr_inputs,
        ["pixel_values"],
        ["logits", "pred_boxes"],
        {"pixel_values": {0: "batch", 2: "height", 3: "width"}},
    ),
    Case(
        "mask2former_pixel_decoder",
        Mask2FormerPixelLevel,
        _detr_inputs,
        ["pixel_values"],
        ["mask_features", "features_32", "features_16", "features_8"],
        {"pixel_values": {0: "batch", 2: "height", 3: "width"}},
    ),
    Case(
        "glm4v_pos_embed",
        _glm4v,
        _glm4v_inputs,
        ["embeddings", "lengths", "image_shapes", "h_coords", "w_coords"],
        ["embeddings_out"],
        {
            "embeddings": {0: "tokens"},
            "lengths": {0: "images"},
            "image_shapes": {0: "images"},
            "h_coords": {0: "tokens"},
            "w_coords": {0: "tokens"},
        },
        notes=["transformers' Glm4vVisionEmbeddings: a cubic resize of the position table"],
    ),
    Case(
        "kornia_warp_perspective",
        KorniaWarpPerspective,
        _perspective_inputs,
        ["image", "homography"],
        ["warped"],
        {"image": {0: "batch", 2: "height", 3: "width"}, "homography": {0: "batch"}},
    ),
    Case(
        "kornia_warp_affine",
        KorniaWarpAffine,
        _affine_inputs,
        ["image", "matrix"],
        ["warped"],
        {"image": {0: "batch", 2: "height", 3: "width"}, "matrix": {0: "batch"}},
    ),
    Case(
        "kornia_remap",
        KorniaRemap,
        _remap_inputs,
        ["image", "map_x", "map_y"],
        ["remapped"],
        {
            "image": {0: "batch", 2: "height", 3: "width"},
            "map_x": {0: "batch", 1: "height", 2: "width"},
            "map_y": {0: "batch", 1: "height", 2: "width"},
        },
    ),
    Case(
        "kornia_warp_affine3d",
        KorniaWarpAffine3d,
        _affine3d_inputs,
        ["volume", "matrix"],
        ["warped"],
        {"volume": {0: "batch", 2: "depth", 3: "height", 4: "width"}, "matrix": {0: "batch"}},
    ),
    Case(
        "stn_float32",
        SpatialTransformer,
        _stn_inputs(torch.float32),
        ["image"],
        ["features"],
        {"image": {0: "batch", 2: "height", 3: "width"}},
    ),
    Case(
        "stn_float16",
        _stn_half,
        _stn_inputs(torch.float16),
        ["image"],
        ["features"],
        {"image": {0: "batch", 2: "height", 3: "width"}},
        rtol=3e-3,  # lowered: 6e-4 from onnxruntime's run; a 1% error in its GridSample: 1.1e-2
    ),
]


# ---------------------------------------------------------------------------------------------
# Export and check


def _export(case, model, args, exporter, opset, dynamic, path):
    """Export with the dynamic axes asked for: "all" of the case's, "batch" (axis 0), "none"."""
    axes = {
        name: {a: s for a, s in spec.items() if dynamic == "all" or a == 0}
        for name, spec in case.dynamic.items()
    }
    if dynamic == "none":
        axes = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if exporter == "torchscript":
            torch.onnx.export(
                model,
                args,
                str(path),
                dynamo=False,
                opset_version=opset,
                input_names=case.input_names,
                output_names=case.output_names,
                dynamic_axes=axes or None,
            )
            proto = onnx.load(str(path))
        else:
            shapes = None
            if axes:
                shapes = tuple(
                    {axis: torch.export.Dim.AUTO for axis in axes.get(name, {})}
                    for name in case.input_names
                )
            program = torch.onnx.export(
                model,
                args,
                dynamo=True,
                opset_version=opset,
                input_names=case.input_names,
                output_names=case.output_names,
                dynamic_shapes=shapes,
                optimize=True,
                verbose=False,
            )
            proto = program.model_proto
    return proto


def _stripped(proto: onnx.ModelProto) -> onnx.ModelProto:
    """The export without its per-node metadata (dynamo's stack traces: up to 70% of a file)."""

    def strip(graph):
        for node in graph.node:
            del node.metadata_props[:]
            node.doc_string = ""
            for attribute in node.attribute:
                if attribute.type == onnx.AttributeProto.GRAPH:
                    strip(attribute.g)
                for sub in attribute.graphs:
                    strip(sub)
        for value in [*graph.value_info, *graph.input, *graph.output, *graph.initializer]:
            del value.metadata_props[:]

    strip(proto.graph)
    for function in proto.functions:
        for node in function.node:
            del node.metadata_props[:]
    return proto


def _ort_run(proto, feeds):
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.log_severity_level = 3
    session = ort.InferenceSession(proto.SerializeToString(), options, ["CPUExecutionProvider"])
    return session.run(None, feeds)


def _flat(outputs) -> list[np.ndarray]:
    if isinstance(outputs, torch.Tensor):
        return [outputs.detach().numpy()]
    return [o.detach().numpy() for o in outputs]


def _relative_error(actual, expected) -> float:
    expected = expected.astype(np.float64)
    scale = max(float(np.max(np.abs(expected))), 1e-30) if expected.size else 1.0
    if actual.shape != expected.shape:
        return float("inf")
    return float(np.max(np.abs(actual.astype(np.float64) - expected), initial=0.0)) / scale


def _gridsample_count(proto):
    count = 0

    def walk(graph):
        nonlocal count
        for node in graph.node:
            count += node.op_type == "GridSample"
            for attribute in node.attribute:
                if attribute.type == onnx.AttributeProto.GRAPH:
                    walk(attribute.g)
                for sub in attribute.graphs:
                    walk(sub)

    walk(proto.graph)
    for function in proto.functions:
        walk(function)
    return count


def _gridsample_types(proto):
    types = value_types(proto)
    kinds = {}
    for node in proto.graph.node:
        if node.op_type == "GridSample":
            attributes = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
            mode = attributes.get("mode", b"bilinear").decode()
            padding = attributes.get("padding_mode", b"zeros").decode()
            x, grid = (
                onnx.helper.tensor_dtype_to_np_dtype(types[name]).name for name in node.input[:2]
            )
            key = (
                f"{mode} {padding} align_corners={attributes.get('align_corners', 0)}"
                f" X {x} grid {grid}"
            )
            kinds[key] = kinds.get(key, 0) + 1
    return kinds


def _dynamic_axes(proto):
    axes = {}
    for value in proto.graph.input:
        dims = value.type.tensor_type.shape.dim
        symbolic = {i: d.dim_param for i, d in enumerate(dims) if d.dim_param}
        if symbolic:
            axes[value.name] = symbolic
    return axes


def _feeds(proto, args):
    names = [v.name for v in proto.graph.input]
    arrays = [a.numpy() for a in args]
    if len(names) != len(arrays):
        raise RuntimeError(f"graph inputs {names} for {len(arrays)} arguments")
    return dict(zip(names, arrays, strict=True))


def _size_args(case: Case, size_set: int, dynamic: str) -> tuple[torch.Tensor, ...]:
    """Inputs at the export's sizes (set 0), or at others the export's dynamic axes allow."""
    if size_set == 0:
        return case.inputs(0, torch.Generator().manual_seed(SEED + 1))
    if dynamic == "batch":  # the export's sizes, twice the batch
        return tuple(
            torch.cat([a, a]) for a in case.inputs(0, torch.Generator().manual_seed(SEED + 2))
        )
    return case.inputs(1, torch.Generator().manual_seed(SEED + 2))


def _compare(model, proto, args):
    """PyTorch's outputs, onnxruntime's (None where it fails), their errors, what was changed."""
    as_written, changes = runnable(proto)
    with torch.no_grad():
        expected = _flat(model(*args))
    try:
        actual = _ort_run(as_written, _feeds(proto, args))
        errors = [_relative_error(a, e) for a, e in zip(actual, expected, strict=True)]
    except Exception as error:  # noqa: BLE001 - any failure marks the export unusable
        actual, errors = None, [f"{type(error).__name__}: {str(error)[:200]}"]
    return expected, actual, errors, changes


def _ok(errors, rtol):
    return all(isinstance(e, float) and e <= rtol for e in errors)


def _export_at(case, model, args, exporter, opset, dynamic, notes):
    """Export, at opset 20 where TorchScript cannot export an op at 17 (affine_grid)."""
    with tempfile.TemporaryDirectory() as tmp, torch.no_grad():
        path = pathlib.Path(tmp) / "model.onnx"
        try:
            return _export(case, model, args, exporter, opset, dynamic, path), opset
        except torch.onnx.errors.UnsupportedOperatorError as error:
            if exporter != "torchscript" or opset == 20 or "version 20" not in str(error):
                raise
            notes.append(f"TorchScript at opset {opset}: {str(error).splitlines()[0]}")
            return _export(case, model, args, exporter, 20, dynamic, path), 20


def _dynamic_holds(case, model, proto, exporter, opset, dynamic) -> tuple[bool, str]:
    """Whether the export is right at other sizes: PyTorch's outputs, or a static export's."""
    args = _size_args(case, 1, dynamic)
    _, actual, errors, _ = _compare(model, proto, args)
    if _ok(errors, case.rtol):
        return True, ""
    if actual is not None:  # the export may depart from PyTorch everywhere: ask a static one
        static, _ = _export_at(case, model, args, exporter, opset, "none", [])
        _, static_actual, _, _ = _compare(model, static, args)
        if static_actual is not None:
            pairs = zip(actual, static_actual, strict=True)
            if _ok([_relative_error(a, e) for a, e in pairs], case.rtol):
                return True, "departs from PyTorch at other sizes as a static export there does"
    return False, f"{[e if isinstance(e, str) else float(f'{e:.3g}') for e in errors]}"


def _write(case, exporter, name, proto, opset, model, out_dir, notes) -> dict:
    """Check the export at its sizes, then write it, its inputs and expected outputs."""
    notes = list(notes)
    args = _size_args(case, 0, "none")
    expected, actual, errors, changes = _compare(model, proto, args)
    for change in sorted(set(changes)):
        count = changes.count(change)
        if change.startswith("double"):
            notes.append(
                f"{count} GridSample with float X and a double grid: onnxruntime cannot run the "
                "original (compared with PyTorch here with the grid cast to float)"
            )
        else:
            notes.append(
                f"{count} float16 GridSample: compared with PyTorch here spelled out in float32 "
                "(onnxruntime drops a float16 rounding of the grid that precedes its own Cast)"
            )
    source = "pytorch"
    if not _ok(errors, case.rtol):
        if actual is None or any(c.startswith("double") for c in changes):
            raise RuntimeError(
                f"{name}: departs from PyTorch and onnxruntime cannot run it: {errors}"
            )
        source = "onnxruntime"
        notes.append(
            f"the export departs from PyTorch (max error / output scale {max(errors):.3g}): "
            "expected outputs are onnxruntime's run of the original ('onnxruntime:<output>'; "
            "PyTorch's are kept under the output names)"
        )
    output_names = [v.name for v in proto.graph.output]
    feeds = _feeds(proto, args)
    arrays = {**feeds, **dict(zip(output_names, expected, strict=True))}
    if source == "onnxruntime":
        arrays.update({f"onnxruntime:{k}": v for k, v in zip(output_names, actual, strict=True)})
    path = out_dir / f"{name}.onnx"
    onnx.save(_stripped(proto), str(path))
    np.savez_compressed(out_dir / f"{name}.npz", **arrays)
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise RuntimeError(f"{path.name} is {size} bytes, more than {MAX_FILE_BYTES}")
    return {
        "model": case.name,
        "exporter": exporter,
        "opset": opset,
        "ir_version": proto.ir_version,
        "bytes": size,
        "npz_bytes": (out_dir / f"{name}.npz").stat().st_size,
        "gridsample": _gridsample_count(proto),
        "gridsample_kinds": _gridsample_types(proto),
        "dynamic_axes": _dynamic_axes(proto),
        "inputs": {k: list(v.shape) for k, v in feeds.items()},
        "expected_from": source,
        "pytorch_error": [e if isinstance(e, str) else float(f"{e:.3g}") for e in errors],
        "rtol": case.rtol,
        "notes": notes,
    }


def build(case: Case, exporter: str, out_dir: pathlib.Path) -> dict[str, dict]:
    """Export one model with one exporter: the records of the files written, by name."""
    torch.manual_seed(SEED)
    model = case.build().eval()
    args = _size_args(case, 0, "none")
    notes = list(case.notes)
    name = f"{case.name}_{exporter}"
    opset = EXPORTERS[exporter]
    proto = None
    for dynamic in ("all", "batch", "none"):
        try:
            proto, opset = _export_at(case, model, args, exporter, opset, dynamic, notes)
        except Exception as error:  # noqa: BLE001 - the exporter's own failure, recorded
            notes.append(
                f"export with dynamic axes '{dynamic}' failed: "
                f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"
            )
            proto = None
            continue
        if dynamic == "none":
            break
        holds, detail = _dynamic_holds(case, model, proto, exporter, opset, dynamic)
        if holds:
            if detail:
                notes.append(f"with dynamic axes '{dynamic}', the export {detail}")
            break
        notes.append(f"with dynamic axes '{dynamic}' the export is wrong at other sizes: {detail}")
        proto = None
    if proto is None:
        raise RuntimeError(f"{name}: no export ({notes})")
    records = {name: _write(case, exporter, name, proto, opset, model, out_dir, notes)}
    if dynamic != "none":
        # A static export may type its GridSamples differently (TorchScript's Deformable DETR
        # and Mask2Former: a double grid with float X): keep it too.
        static, static_opset = _export_at(case, model, args, exporter, opset, "none", [])
        if _gridsample_types(static) != _gridsample_types(proto):
            static_notes = [*case.notes, "static sizes: its GridSamples are typed otherwise"]
            records[f"{name}_static"] = _write(
                case, exporter, f"{name}_static", static, static_opset, model, out_dir, static_notes
            )
    return records


# ---------------------------------------------------------------------------------------------
# Deployment sizes (bench/models.py's DEPLOY) for the exports whose sizes are fixed: each is
# exported again there, with the same dynamic axes, for bench/models.py --size deploy alone.

DEPLOY_DIR = HERE / "deploy"
_DETECTOR = (1, 3, 640, 640)
DEPLOY_INPUTS: dict[str, Callable[[torch.Generator], tuple[torch.Tensor, ...]]] = {
    "rt_detr": lambda g: (_image(g, *_DETECTOR),),
    "deformable_detr": lambda g: (_image(g, *_DETECTOR),),
    "mask2former_pixel_decoder": lambda g: (_image(g, *_DETECTOR),),
    "raft_small": lambda g: (_image(g, 1, 3, 440, 1024), _image(g, 1, 3, 440, 1024)),
    "stn_float32": lambda g: (_smooth(g, 1, 3, 480, 640),),
    "stn_float16": lambda g: (_smooth(g, 1, 3, 480, 640, dtype=torch.float16),),
    "kornia_warp_affine3d": lambda g: (_smooth(g, 1, 2, 96, 128, 160), _affine(g, 1, 3)),
}


def _deploy_dynamic(name: str, record: dict) -> str | None:
    """The dynamic axes a deployment export keeps ("batch", "none"), or None: none needed."""
    spatial = {a for axes in record["dynamic_axes"].values() for a in axes if a != "0"}
    if spatial:
        return None  # its own export takes the deployment size
    return "batch" if record["dynamic_axes"] and not name.endswith("_static") else "none"


def build_deploy(names: list[str], out_dir: pathlib.Path) -> int:
    """Export each fixed-size corpus export again at its deployment size into ``out_dir``.

    Checked against PyTorch there as the stored ones are (``_compare``); the manifest records
    the error. No inputs are written: bench/models.py builds them as it does for the others.
    """
    stored = json.loads((HERE / "manifest.json").read_text())["models"]
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "manifest.json"
    manifest = json.loads(path.read_text()) if path.exists() else {"models": {}}
    manifest["versions"] = {"torch": torch.__version__, "onnx": onnx.__version__}
    for name, record in sorted(stored.items()):
        case = next(c for c in CASES if c.name == record["model"])
        dynamic = _deploy_dynamic(name, record)
        if case.name not in DEPLOY_INPUTS or dynamic is None or (names and case.name not in names):
            continue
        torch.manual_seed(SEED)
        model = case.build().eval()
        args = DEPLOY_INPUTS[case.name](torch.Generator().manual_seed(SEED + 3))
        try:
            proto, opset = _export_at(
                case, model, args, record["exporter"], record["opset"], dynamic, []
            )
            _, _, errors, _ = _compare(model, proto, args)
        except Exception as error:  # noqa: BLE001 - the exporter's own failure, recorded
            print(f"{name}: FAILED {type(error).__name__}: {str(error)[:200]}", file=sys.stderr)
            continue
        if _gridsample_types(proto) != record["gridsample_kinds"]:
            print(f"{name}: its GridSamples are typed otherwise at this size", file=sys.stderr)
            continue
        file = out_dir / f"{name}.onnx"
        onnx.save(_stripped(proto), str(file))
        errors = [e if isinstance(e, str) else float(f"{e:.3g}") for e in errors]
        manifest["models"][name] = {
            "inputs": [list(a.shape) for a in args],
            "dynamic": dynamic,
            "opset": opset,
            "bytes": file.stat().st_size,
            "pytorch_error": errors,
        }
        print(
            f"{name}: {file.stat().st_size / 1024:.0f} kB at {manifest['models'][name]['inputs']}, "
            f"dynamic {dynamic}, error against PyTorch {errors}"
        )
    manifest["models"] = dict(sorted(manifest["models"].items()))
    path.write_text(json.dumps(manifest, indent=1) + "\n")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="models to rebuild (default: all)")
    parser.add_argument("-o", "--out", type=pathlib.Path, default=HERE)
    parser.add_argument(
        "--deploy",
        action="store_true",
        help=f"export the fixed-size exports at their deployment sizes into {DEPLOY_DIR.name}/ "
        "(for bench/models.py --size deploy; not part of the corpus)",
    )
    parsed = parser.parse_args(argv)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    if parsed.deploy:
        return build_deploy(parsed.names, DEPLOY_DIR)
    manifest_path = parsed.out / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    manifest.setdefault("models", {})
    manifest["versions"] = {
        "torch": torch.__version__,
        "onnx": onnx.__version__,
        "onnxruntime": ort.__version__,
    }
    for case in CASES:
        if parsed.names and case.name not in parsed.names:
            continue
        for exporter in EXPORTERS:
            for stale in [
                k
                for k, r in manifest["models"].items()
                if r["model"] == case.name and r["exporter"] == exporter
            ]:
                del manifest["models"][stale]
                for suffix in (".onnx", ".npz"):
                    (parsed.out / f"{stale}{suffix}").unlink(missing_ok=True)
            try:
                records = build(case, exporter, parsed.out)
            except Exception as error:  # noqa: BLE001
                print(f"{case.name} {exporter}: FAILED {error}", file=sys.stderr)
                continue
            manifest["models"].update(records)
            for name, record in records.items():
                print(
                    f"{name}: {record['bytes'] / 1024:.0f} kB, "
                    f"{record['gridsample']} GridSample {record['gridsample_kinds']}, "
                    f"dynamic {record['dynamic_axes']}, "
                    f"expected from {record['expected_from']} {record['pytorch_error']}"
                )
                for note in record["notes"]:
                    print(f"  note: {note}")
    manifest["models"] = dict(sorted(manifest["models"].items()))
    total = sum(r["bytes"] + r["npz_bytes"] for r in manifest["models"].values())
    manifest_path.write_text(json.dumps(manifest, indent=1) + "\n")
    print(f"corpus: {len(manifest['models'])} models, {total / 2**20:.2f} MiB (.onnx and .npz)")
    if total > MAX_CORPUS_BYTES:
        print(f"corpus over {MAX_CORPUS_BYTES} bytes", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
