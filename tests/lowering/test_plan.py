"""The plan: every choice on either side of every threshold, and every form run on tiny shapes.

The table needs no runtime: ``plan_of`` reads only the spec, the static shapes and the target.
The forced plans run each gather and sum form, whatever the thresholds would pick, through the
rule and onnxruntime, against the independent oracle.
"""

from __future__ import annotations

import collections
import pathlib

import numpy as np
import onnx_ir as ir
import pytest
from conftest import (
    assert_close,
    gridsample_model,
    make_grid,
    oracle,
    run_onnx_reference,
    run_ort,
    spec_model,
)
from onnxscript import rewriter

from gridsample_lower import lower
from gridsample_lower.check.reference import grid_sample
from gridsample_lower.lowering import costs
from gridsample_lower.lowering.plan import node_plan, plan_of
from gridsample_lower.lowering.rule import GridSampleLowering
from gridsample_lower.lowering.targets import get_target
from gridsample_lower.spec import GridSampleSpec

INT16, INT32, INT64 = "INT16", "INT32", "INT64"
LINEAR, CUBIC, NEAREST = (
    GridSampleSpec(2, mode, "border", 0) for mode in ("linear", "cubic", "nearest")
)
NEAREST_ZEROS = GridSampleSpec(2, "nearest", "zeros", 0)
LINEAR_ZEROS = GridSampleSpec(2, "linear", "zeros", 0)
CUBIC3 = GridSampleSpec(3, "cubic", "zeros", 0)
CUBIC16 = GridSampleSpec(2, "cubic", "zeros", 0, x_dtype=ir.DataType.FLOAT16)


SYMBOLIC = (["N", 3, "H", "W"], ["N", "h", "w", 2])  # X and grid: 3 channels, sizes unknown


def _points(count: int) -> list[int]:
    return [1, count, 1, 2]


# (why, spec, X shape, grid shape, target, the plan's fields expected)
TABLE = [
    # ROWS_MIN_CHANNELS = 33: rows from there, while X is cache-sized and the points pay the copy
    ("32 channels", LINEAR, [1, 32, 16, 16], _points(1024), "generic", {"gather": "elements"}),
    ("33 channels", LINEAR, [1, 33, 16, 16], _points(1024), "generic", {"gather": "rows"}),
    # ROWS_MAX_ELEMENTS = 2**18: the chain reads X at random, so X must stay cache-sized
    ("X 2**18 values", LINEAR, [1, 64, 64, 64], _points(4096), "generic", {"gather": "rows"}),
    ("X over 2**18", LINEAR, [1, 64, 64, 65], _points(4096), "generic", {"gather": "elements"}),
    # two copies of X for the chain: 2 S <= taps x points
    ("2S = 4P", LINEAR, [1, 40, 16, 16], _points(128), "generic", {"gather": "rows"}),
    ("2S > 4P", LINEAR, [1, 40, 16, 16], _points(127), "generic", {"gather": "elements"}),
    ("unknown sizes", LINEAR, [1, 40, "H", "W"], [1, "h", "w", 2], "generic", {"gather": "rows"}),
    (
        "unknown, 1 tap",
        NEAREST,
        [1, 40, "H", "W"],
        [1, "h", "w", 2],
        "generic",
        {"gather": "elements"},
    ),
    ("no GatherElements", NEAREST, [1, 1, 4, 4], _points(1), "webnn", {"gather": "rows"}),
    # FUSED_ROWS_MAX_BATCH = 1 (tvm): rows at any channel count up to one sample, not past it,
    # not for one tap, nor with a symbolic batch (no Range there for the rows' offsets)
    ("tvm, 3 channels", LINEAR, [1, 3, 16, 16], _points(256), "tvm", {"gather": "rows"}),
    ("tvm, 2 samples", LINEAR, [2, 3, 16, 16], _points(256), "tvm", {"gather": "elements"}),
    ("tvm, nearest", NEAREST, [1, 3, 16, 16], _points(256), "tvm", {"gather": "elements"}),
    ("tvm, batch N", LINEAR, ["N", 64, 16, 16], _points(256), "tvm", {"gather": "elements"}),
    ("tvm, 2S = 4P", LINEAR, [1, 3, 16, 16], _points(128), "tvm", {"gather": "rows"}),
    ("tvm, 2S > 4P", LINEAR, [1, 3, 16, 16], _points(127), "tvm", {"gather": "elements"}),
    # SCALED_MIN_CHANNELS = 24 (onnxruntime, fewer than 8 taps)
    ("23, scaled", LINEAR, [1, 23, 16, 16], _points(512), "onnxruntime", {"gather": "elements"}),
    ("24, scaled", LINEAR, [1, 24, 16, 16], _points(512), "onnxruntime", {"sum": "scaled"}),
    # SCALED_FULL_COPY_CHANNELS = 32: one copy's worth of points from there
    ("31, S = 4P", LINEAR, [1, 31, 16, 16], _points(64), "onnxruntime", {"gather": "elements"}),
    ("32, S = 4P", LINEAR, [1, 32, 16, 16], _points(64), "onnxruntime", {"sum": "scaled"}),
    # SCALED_MAX_VALUES = 2**21 below 33 channels; past it GatherElements channel by channel
    ("24 x 4 x 21845", LINEAR, [1, 24, 16, 16], _points(21845), "onnxruntime", {"sum": "scaled"}),
    (
        "24 x 4 x 21846",
        LINEAR,
        [1, 24, 16, 16],
        _points(21846),
        "onnxruntime",
        {"sum": "by_channel"},
    ),
    # MATMUL_MIN_TAPS = 8, MATMUL_MIN_VALUES = 256: channels x taps
    ("cubic 15 ch", CUBIC, [1, 15, 16, 16], _points(256), "onnxruntime", {"sum": "by_channel"}),
    ("cubic 16 ch", CUBIC, [1, 16, 16, 16], _points(256), "onnxruntime", {"sum": "matmul"}),
    ("generic: no MatMul", CUBIC, [1, 16, 16, 16], _points(256), "generic", {"sum": "reduce_sum"}),
    # REDUCED_ROWS_MIN_TAPS = 8: interleaved rows (openvino) of 8+ taps summed by one ReduceSum
    ("openvino cubic rows", CUBIC, [1, 40, 16, 16], _points(64), "openvino", {"sum": "reduce_sum"}),
    (
        "openvino 3-D rows",
        GridSampleSpec(3, "linear", "zeros", 0),
        [1, 40, 8, 8, 8],
        [1, 4, 4, 4, 3],
        "openvino",
        {"sum": "reduce_sum"},
    ),
    ("openvino linear rows", LINEAR, [1, 40, 16, 16], _points(64), "openvino", {"sum": "chain"}),
    # TAPS_MAX_VALUES = 2**25 in one Gather of every tap
    ("64 x 16 x 32768", CUBIC, [1, 64, 16, 16], _points(32768), "onnxruntime", {"sum": "matmul"}),
    ("64 x 16 x 32769", CUBIC, [1, 64, 16, 16], _points(32769), "onnxruntime", {"sum": "chain"}),
    # BY_CHANNEL_MAX_CHANNELS = 16 with 8+ taps (X too large for rows)
    ("cubic 16, big X", CUBIC, [1, 16, 64, 64], _points(1), "onnxruntime", {"sum": "by_channel"}),
    ("cubic 17, big X", CUBIC, [1, 17, 64, 64], _points(1), "onnxruntime", {"sum": "reduce_sum"}),
    ("1 channel", LINEAR, [1, 1, 16, 16], _points(16), "onnxruntime", {"sum": "by_channel"}),
    # BY_CHANNEL_MIN_VALUES = 2**21 gathered values below 33 channels
    ("8 x 4 x 65535", LINEAR, [1, 8, 16, 16], _points(65535), "onnxruntime", {"sum": "reduce_sum"}),
    ("8 x 4 x 65536", LINEAR, [1, 8, 16, 16], _points(65536), "onnxruntime", {"sum": "by_channel"}),
    # BY_CHANNEL_INT64_CHANNELS = 4 where the indices are int64 (symbolic sizes)
    ("4, int64", LINEAR, [1, 4, "H", "W"], _points(64), "onnxruntime", {"sum": "by_channel"}),
    ("5, int64", LINEAR, [1, 5, "H", "W"], _points(64), "onnxruntime", {"sum": "reduce_sum"}),
    ("4, int32", LINEAR, [1, 4, 8, 8], _points(64), "onnxruntime", {"sum": "reduce_sum"}),
    # SAMPLES_MAX_SIZE = 128: MNN's and ncnn's own linear kernel reads cubic's samples up to there
    ("cubic, 128", CUBIC, [1, 3, 100, 128], _points(64), "mnn", {"reader": "samples"}),
    ("cubic, 129", CUBIC, [1, 3, 100, 129], _points(64), "mnn", {"reader": "centres"}),
    # READER_CUBIC_MAX_CHANNELS = 63: MNN's cubic gathers rows from 64 channels
    ("cubic, 63 ch", CUBIC, [1, 63, 16, 16], _points(64), "mnn", {"reader": "samples"}),
    ("cubic, 64 ch", CUBIC, [1, 64, 16, 16], _points(64), "mnn", {"reader": "", "gather": "rows"}),
    ("nearest, mnn", NEAREST, [1, 3, 16, 16], _points(64), "mnn", {"reader": "centres"}),
    ("ncnn, 3-D cubic", CUBIC3, [1, 3, 8, 8, 8], [1, 4, 4, 4, 3], "ncnn", {"reader": "centres"}),
    ("mnn, float16", CUBIC16, [1, 3, 16, 16], _points(64), "mnn", {"reader": ""}),
    # SLOT_MAX_RATIO = 4: X at most 4x the points
    ("S = 4P", NEAREST_ZEROS, [1, 3, 16, 16], _points(64), "generic", {"zero_slot": True}),
    ("S > 4P", NEAREST_ZEROS, [1, 3, 16, 16], _points(63), "generic", {"zero_slot": False}),
    ("slot, unknown", NEAREST_ZEROS, [1, 3, "H", "W"], _points(1), "generic", {"zero_slot": True}),
    ("slot, rows", NEAREST_ZEROS, [1, 3, 16, 16], _points(64), "webnn", {"zero_slot": False}),
    ("no masks", NEAREST, [1, 3, 16, 16], _points(64), "generic", {"zero_slot": False}),
    # the ring: as wide as the kernel for GatherElements, one for the rows, none without Pad
    (
        "ring, linear",
        LINEAR_ZEROS,
        [1, 3, 8, 8],
        _points(64),
        "generic",
        {"ring": 2, "per_point": True},
    ),
    (
        "ring, rows",
        LINEAR_ZEROS,
        [1, 40, 8, 8],
        _points(64),
        "generic",
        {"ring": 1, "per_point": False},
    ),
    (
        "ring, cubic",
        GridSampleSpec(2, "cubic", "zeros", 0),
        [1, 3, 8, 8],
        _points(9),
        "generic",
        {"ring": 4},
    ),
    ("no ring, border", LINEAR, [1, 3, 8, 8], _points(64), "generic", {"ring": 0}),
    # MASKED_TAPS_MIN_RATIO = 8: X of 8x the values the taps read, or more: no ring, a Where
    (
        "S = 8 x 4P",
        LINEAR_ZEROS,
        [1, 3, 32, 32],
        _points(32),
        "generic",
        {"ring": 0, "masks": True},
    ),
    (
        "S < 8 x 4P",
        LINEAR_ZEROS,
        [1, 3, 32, 32],
        _points(33),
        "generic",
        {"ring": 2, "masks": False},
    ),
    (
        "masked, rows",
        LINEAR_ZEROS,
        [1, 64, 32, 32],
        _points(32),
        "onnxruntime",
        {"gather": "elements", "masks": True, "sum": "reduce_sum"},
    ),
    ("unknown X: may be empty", LINEAR_ZEROS, [1, 3, "H", "W"], _points(1), "generic", {"ring": 2}),
    ("unknown points", LINEAR_ZEROS, [1, 3, 64, 64], [1, "h", "w", 2], "generic", {"ring": 2}),
    (
        "masked rows, openvino",
        LINEAR_ZEROS,
        [1, 3, 32, 32],
        _points(32),
        "openvino",
        {"gather": "rows", "masks": True, "ring": 0, "fraction": True},
    ),
    (
        "S < 8 x 4P, openvino",
        LINEAR_ZEROS,
        [1, 3, 32, 32],
        _points(33),
        "openvino",
        {"gather": "rows", "masks": False, "ring": 2},
    ),
    (
        "unknown X, openvino: an If",
        LINEAR_ZEROS,
        [1, 3, "H", "W"],
        _points(1),
        "openvino",
        {"masks": True, "ring": 0, "gather": "rows"},
    ),
    (
        "unknown points, openvino",
        LINEAR_ZEROS,
        [1, 3, 64, 64],
        [1, "h", "w", 2],
        "openvino",
        {"masks": False, "ring": 2},
    ),
    ("masked, webnn", LINEAR_ZEROS, [1, 3, 32, 32], _points(1), "webnn", {"masks": False}),
    # TILE = 128, ALIASED_BYTES = 2048, TILED_MAX_VALUES = 2**20: each channel's pixels a multiple of 2 kB
    ("512 float32 pixels", LINEAR, [1, 40, 16, 32], _points(256), "generic", {"tiled": True}),
    ("528 pixels", LINEAR, [1, 40, 16, 33], _points(264), "generic", {"tiled": False}),
    ("2**20 values", LINEAR, [1, 2048, 16, 32], _points(1), "webnn", {"tiled": True}),
    ("over 2**20", LINEAR, [1, 2049, 16, 32], _points(1), "webnn", {"tiled": False}),
    # index types: int32 below 2**31; the rows' batch offsets count every sample
    (
        "static",
        LINEAR,
        [2, 3, 8, 8],
        _points(4),
        "generic",
        {"sample_type": INT32, "index_type": INT32},
    ),
    ("symbolic", LINEAR, [2, 3, "H", 8], _points(4), "generic", {"sample_type": INT64}),
    (
        "N*S over 2**31",
        LINEAR,
        [3, 40, 32768, 32768],
        [3, "h", "w", 2],
        "generic",
        {"gather": "rows", "sample_type": INT32, "index_type": INT64},
    ),
    ("int32 target", LINEAR, [2, 3, "H", 8], _points(4), "int32", {"sample_type": INT32}),
    # one index per point combined in float while exact: 2**24 in float32 (targets whose
    # runtime may store floats in bfloat16 never: generic's indices are integers, openvino's
    # coordinates interleaved)
    (
        "2**24 float32",
        NEAREST_ZEROS,
        [1, 1, 4096, 4096],
        _points(1),
        "onnxruntime",
        {"flat_in_float": True},
    ),
    (
        "over 2**24",
        NEAREST_ZEROS,
        [1, 1, 4096, 4097],
        _points(1),
        "onnxruntime",
        {"flat_in_float": False},
    ),
    (
        "generic, one per point",
        LINEAR_ZEROS,
        [1, 1, 64, 64],
        _points(1),
        "generic",
        {"flat_in_float": False, "integer_indices": True, "positions_from_grid": True},
    ),
    # linear's and cubic's floors and fractions from the grid (bfloat16-safe), past 256 pixels too
    (
        "generic linear 253",
        LINEAR,
        [1, 3, 8, 253],
        _points(4),
        "generic",
        {"positions_from_grid": True},
    ),
    (
        "generic cubic symbolic",
        CUBIC,
        [1, 3, "H", 8],
        _points(4),
        "generic",
        {"positions_from_grid": False},
    ),
    # nearest's positions from the grid in one region (bfloat16-safe) where sizes are static
    (
        "generic nearest",
        NEAREST_ZEROS,
        [2, 3, 300, 600],
        _points(4),
        "generic",
        {"positions_from_grid": True, "integer_indices": True},
    ),
    (
        "generic nearest symbolic",
        NEAREST_ZEROS,
        [1, 3, "H", 8],
        _points(4),
        "generic",
        {"positions_from_grid": False, "integer_indices": True},
    ),
    (
        "onnxruntime nearest",
        NEAREST_ZEROS,
        [1, 3, 8, 8],
        _points(4),
        "onnxruntime",
        {"positions_from_grid": False, "integer_indices": False},
    ),
    (
        "bfloat16, one per point",
        NEAREST_ZEROS,
        [1, 1, 64, 64],
        _points(1),
        "openvino",
        {"flat_in_float": False},
    ),
    # coordinates interleaved where the target's runtime may store floats in bfloat16
    ("generic", LINEAR, [1, 3, 8, 8], _points(4), "generic", {"interleaved": False}),
    ("openvino", LINEAR, [1, 3, 8, 8], _points(4), "openvino", {"interleaved": True}),
    ("onnxruntime", LINEAR, [1, 3, 8, 8], _points(4), "onnxruntime", {"interleaved": False}),
    # positions in int32 where they surely fit: static sizes, or float32 coordinates bounded
    ("bounded float32", LINEAR, [1, 3, "H", "W"], _points(4), "generic", {"position_type": INT32}),
    (
        "nearest zeros, symbolic",
        NEAREST_ZEROS,
        [1, 3, "H", "W"],
        _points(4),
        "generic",
        {"position_type": INT64},
    ),
    # litert: indices in float32 while the largest (N x the padded S, rows) is exact there;
    # FLOAT_INDEX_LIMIT = 2**24
    ("float index", LINEAR_ZEROS, [1, 3, 4093, 4094], _points(4), "litert", {"float_index": True}),
    ("2**24 index", LINEAR_ZEROS, [1, 3, 4094, 4094], _points(4), "litert", {"float_index": False}),
    ("float index symbolic", LINEAR, [1, 3, "H", 8], _points(4), "litert", {"float_index": False}),
    ("float index batch", LINEAR, ["N", 3, 8, 8], _points(4), "litert", {"float_index": False}),
    ("generic int index", LINEAR, [1, 3, 8, 8], _points(4), "generic", {"float_index": False}),
    # litert: a zero row instead of a Where (SELECT_V2 20-30x a float Mul); one Transpose
    (
        "slot, litert rows",
        NEAREST_ZEROS,
        [1, 3, 16, 16],
        _points(64),
        "litert",
        {"zero_slot": True},
    ),
    ("litert untiled", LINEAR, [1, 2048, 16, 32], _points(1), "litert", {"tiled": False}),
    # litert, one sample, PLANES_MAX_CHANNELS = 16: gathered from its planes below it
    ("planes", LINEAR, [1, 15, 8, 8], _points(64), "litert", {"planes": True, "tiled": False}),
    ("16 channels", LINEAR, [1, 16, 8, 8], _points(64), "litert", {"planes": False}),
    ("planes, batch 2", LINEAR, [2, 3, 8, 8], _points(64), "litert", {"planes": False}),
    ("planes, batch N", LINEAR, ["N", 3, 8, 8], _points(64), "litert", {"planes": False}),
    ("planes, webnn", LINEAR, [1, 3, 8, 8], _points(64), "webnn", {"planes": False}),
    # openvino (slow transposes), one sample, PLANES_SPATIAL_DIVISOR = 2: planes while the
    # padded X (16 x 16 here: a ring of 2) holds taps x points / 2 pixels; nearest and few channels always
    ("ov 2S = 4P", LINEAR_ZEROS, [1, 40, 12, 12], _points(128), "openvino", {"planes": True}),
    ("ov 2S < 4P", LINEAR_ZEROS, [1, 40, 12, 12], _points(129), "openvino", {"planes": False}),
    ("ov cubic", CUBIC, [1, 40, 14, 14], _points(64), "openvino", {"planes": False}),
    ("ov 3 ch", LINEAR, [1, 3, 14, 14], _points(4096), "openvino", {"planes": True}),
    ("ov nearest", NEAREST, [1, 40, 8, 8], _points(4096), "openvino", {"planes": True}),
    # tract takes the same rule (its planes ran 0.47-0.97x its rows where the rule takes them)
    ("tract 3 ch", LINEAR, [1, 3, 14, 14], _points(4096), "tract", {"planes": True}),
    ("tract nearest", NEAREST, ["N", 40, "H", "W"], _points(64), "tract", {"planes": True}),
    ("tract 2S < 4P", LINEAR_ZEROS, [1, 40, 14, 14], _points(129), "tract", {"planes": False}),
    ("ov batch 2", NEAREST, [2, 40, 8, 8], _points(64), "openvino", {"planes": True}),
    # several samples, or an unknown batch, side by side (C, N*S), the ReduceSum too
    ("ov batch 2 cubic", CUBIC, [2, 3, 8, 8], _points(64), "openvino", {"planes": True}),
    ("ov batch N", NEAREST, ["N", 40, 8, 8], _points(64), "openvino", {"planes": True}),
    ("ov batch N cubic", CUBIC, ["N", 3, "H", "W"], _points(64), "openvino", {"planes": True}),
    ("ov N, 40 ch cubic", CUBIC, ["N", 40, "H", "W"], _points(64), "openvino", {"planes": False}),
    ("ov batch 0", NEAREST, [0, 3, 8, 8], _points(64), "openvino", {"planes": False}),
    # litert: 3-D's (N, T1, T2, T3, O1, O2, O3) has 7 axes, past its max_fast_rank of 5
    (
        "flat points",
        GridSampleSpec(3, "linear", "zeros", 0),
        [1, 2, 4, 4, 4],
        [1, 2, 2, 2, 3],
        "litert",
        {"flat_points": True},
    ),
    ("2-D points", LINEAR, [1, 3, 8, 8], _points(4), "litert", {"flat_points": False}),
    (
        "3-D generic",
        GridSampleSpec(3, "linear", "zeros", 0),
        [1, 2, 4, 4, 4],
        [1, 2, 2, 2, 3],
        "generic",
        {"flat_points": False},
    ),
    # POINT_TILES_FROM = 2**16, POINT_TILE = 2**13 (onnxruntime): linear's points in tiles
    # from 2**16 points (N x P), 2**13 a tile, POINT_TILES_MAX = 32 at most
    ("65535 points", LINEAR, [1, 3, 16, 16], _points(2**16 - 1), "onnxruntime", {"point_tiles": 1}),
    ("2**16 points", LINEAR, [1, 3, 16, 16], _points(2**16), "onnxruntime", {"point_tiles": 8}),
    ("2 x 2**15", LINEAR, [2, 3, 16, 16], [2, 2**15, 1, 2], "onnxruntime", {"point_tiles": 8}),
    (
        "2**18 + 2**13",
        LINEAR,
        [1, 3, 8, 8],
        _points(2**18 + 2**13),
        "onnxruntime",
        {"point_tiles": 32},
    ),
    ("2**19 points", LINEAR, [1, 3, 8, 8], _points(2**19), "onnxruntime", {"point_tiles": 32}),
    ("tiles, generic", LINEAR, [1, 3, 16, 16], _points(2**16), "generic", {"point_tiles": 1}),
    # TILE_MIN_SAMPLE_POINTS = 512 of every sample's points a tile (RAFT: 7040 samples of 49)
    ("128 x 1023", LINEAR, [128, 3, 8, 8], [128, 1023, 1, 2], "onnxruntime", {"point_tiles": 1}),
    ("128 x 1024", LINEAR, [128, 3, 8, 8], [128, 1024, 1, 2], "onnxruntime", {"point_tiles": 2}),
    # CUBIC_TAPS = 16, CUBIC_TILES_FROM = 2**14, CUBIC_POINT_TILE = 2**12: cubic from fewer
    ("cubic 16383", CUBIC, [1, 3, 16, 16], _points(2**14 - 1), "onnxruntime", {"point_tiles": 1}),
    ("cubic 2**14", CUBIC, [1, 3, 16, 16], _points(2**14), "onnxruntime", {"point_tiles": 4}),
    # NEAREST_TILES_FROM = 2**18, NEAREST_POINT_TILE = 2**15: nearest only past 2**18
    (
        "nearest 2**18-1",
        NEAREST,
        [1, 3, 8, 8],
        _points(2**18 - 1),
        "onnxruntime",
        {"point_tiles": 1},
    ),
    ("nearest 2**18", NEAREST, [1, 3, 8, 8], _points(2**18), "onnxruntime", {"point_tiles": 8}),
    # SYMBOLIC_POINT_TILES = 16 (nearest 8): symbolic points behind an If, from the same least
    ("symbolic points", LINEAR, *SYMBOLIC, "onnxruntime", {"point_tiles": 16, "tiles_from": 2**16}),
    (
        "symbolic nearest",
        NEAREST,
        *SYMBOLIC,
        "onnxruntime",
        {"point_tiles": 8, "tiles_from": 2**18},
    ),
    # ATTENTION_MIN_HEAD_CHANNELS = 32 is no plan field: tests/lowering/test_attention.py runs
    # heads of 16 and 32 channels, either side of it
    # ATTENTION_PLANES_MIN_TAPS_PER_VALUE = 4 neither: test_attention.py runs queries either
    # side of it
    # ATTENTION_TILE_ROWS = 2**17 neither: test_attention.py runs one unit in tiles of fewer
    # PLANE_TILE_VALUES = 2**17, PLANE_TILES_MAX = 64 neither: test_attention.py gathers from
    # planes in tiles of fewer values
    # SYMBOLIC_PLANE_TILES = 16 neither: test_attention.py takes 4, for fewer queries too
    # refusals: the largest index of the chosen gather
    (
        "webnn too large",
        NEAREST,
        [2, 1, 46341, 46341],
        _points(1),
        "webnn",
        {"refusal": "indices reach 4294976562: too many for int32"},
    ),
    ("empty X", LINEAR, [0, 3, 8, 8], [0, 1, 1, 2], "generic", {"empty": True}),
]


@pytest.mark.parametrize(
    ("why", "spec", "x_shape", "grid_shape", "target", "expected"), TABLE, ids=[t[0] for t in TABLE]
)
def test_the_plan_around_every_threshold(why, spec, x_shape, grid_shape, target, expected):
    plan = plan_of(spec, x_shape, grid_shape, get_target(target))
    got = {key: getattr(plan, key) for key in expected}
    got = {key: value.name if hasattr(value, "name") else value for key, value in got.items()}
    assert got == expected, plan.describe()


def test_every_threshold_has_rows_in_the_table():
    """A threshold added to the plan needs rows on either side of it here."""
    source = pathlib.Path(__file__).read_text()
    for name, value in vars(costs).items():
        if name.isupper() and type(value) is int and name != "INT32_LIMIT":
            assert f"# {name} = " in source or f", {name} = " in source, name


def _text(value) -> str:
    return value.name if isinstance(value, ir.DataType) else str(value)


def test_readme_strategies_are_the_plans():
    """docs/lowered-graph.md shows ``costs.strategy_table()``; every form it names is one the plan takes
    in the table above; every gather, sum and ring the plan takes there is named."""
    readme = (pathlib.Path(__file__).parents[2] / "docs" / "lowered-graph.md").read_text()
    assert costs.strategy_table() in readme, (
        "run: python -c 'from gridsample_lower.lowering.costs import strategy_table; print(strategy_table())'"
    )
    taken = collections.defaultdict(set)
    plans = [plan_of(s, x, g, get_target(t)) for _, s, x, g, t, _ in TABLE]
    plans += [plan_of(s, x, g, get_target("openvino"), **w) for *_, s, x, g, w, _ in OPENVINO_FORMS]
    for plan in plans:
        for strategy in costs.STRATEGIES:
            taken[strategy.choice].add(_text(getattr(plan, strategy.choice)))
    named = collections.defaultdict(set)
    for strategy in costs.STRATEGIES:
        named[strategy.choice].update(strategy.form.split(" or "))
    for choice, forms in named.items():
        assert forms <= taken[choice], (choice, forms - taken[choice])
    for choice in ("gather", "sum", "ring"):
        assert taken[choice] <= named[choice], (choice, taken[choice] - named[choice])


def _forced(force: dict):
    def planner(spec, node, target):
        shapes = [value.shape for value in node.inputs[:2]]
        return plan_of(spec, *shapes, target, force=force)

    return planner


FORMS = [
    {"gather": "elements", "sum": "reduce_sum"},
    {"gather": "elements", "sum": "by_channel"},
    {"gather": "rows", "sum": "chain"},
    {"gather": "rows", "sum": "scaled"},
    {"gather": "rows", "sum": "matmul"},
    {"gather": "rows", "sum": "chain", "tiled": True},
    {"gather": "elements", "sum": "reduce_sum", "masks": True},
    {"gather": "rows", "sum": "chain", "masks": True, "planes": False},
    {"gather": "rows", "sum": "reduce_sum", "masks": True, "planes": False},
]
NEAREST_FORMS = [
    {"gather": gather, "zero_slot": slot}
    for gather in ("elements", "rows")
    for slot in (False, True)
]


def _specs():
    specs = [
        GridSampleSpec(2, m, p, a)
        for m in ("linear", "cubic", "nearest")
        for p in ("zeros", "border", "reflection")
        for a in (0, 1)
    ]
    return specs + [
        GridSampleSpec(1, "linear", "zeros", 1),
        GridSampleSpec(3, "linear", "zeros", 0),
        GridSampleSpec(3, "cubic", "reflection", 1),
    ]


CASES = [
    (spec, form)
    for spec in _specs()
    for form in (NEAREST_FORMS if spec.mode == "nearest" else FORMS)
    if not (form.get("sum") == "scaled" and {"linear": 2, "cubic": 4}[spec.mode] ** spec.rank >= 8)
]


@pytest.mark.parametrize(
    ("spec", "form"),
    CASES,
    ids=[f"{s.label}-{'-'.join(map(str, f.values()))}".replace(" ", "") for s, f in CASES],
)
@pytest.mark.parametrize("target", ["generic", "onnxruntime", "openvino"])
def test_every_forced_form_matches_the_oracle(spec, form, target, rng):
    """Each gather and sum form, forced on tiny shapes, samples what the oracle samples.

    The rows' X makes 128 pixels once padded by a ring of one, so the tiled copy can run
    (openvino's ring is as wide as the kernel: an axis it would empty keeps its size).
    """
    padded = {1: [128], 2: [8, 16], 3: [4, 4, 8]}[spec.rank]
    if form["gather"] == "rows":  # a ring of zeros, or none
        plan = plan_of(spec, None, None, get_target(target), force={"gather": "rows"})
        padded = [size - 2 * plan.ring if size > 2 * plan.ring else size for size in padded]
    x = rng.standard_normal((2, 3, *padded)).astype(np.float32)
    grid = make_grid(rng, (2, *[3, 4, 2][: spec.rank], spec.rank), far=True)
    model = spec_model(spec, x, grid)
    rule = GridSampleLowering.rule(target=target, planner=_forced(form))
    lowered = rewriter.rewrite(model, [rule])
    assert all(node.op_type != "GridSample" for node in lowered.graph.node)
    assert_close(run_ort(lowered, {"X": x, "grid": grid}), oracle(spec, x, grid), spec.mode)


@pytest.mark.parametrize("target", ["onnxruntime", "openvino"])
@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize("align", [0, 1])
def test_masked_taps_are_exact_beside_infinite_pixels(mode, align, target, rng):
    """A large X and few points: taps masked once gathered (GatherElements; the openvino
    target's rows), not X padded; an outside tap adds 0 even where it was clamped onto an
    infinite or NaN pixel, as in onnxruntime's kernel."""
    spec = GridSampleSpec(2, mode, "zeros", align)
    x = rng.standard_normal((2, 3, 40, 48)).astype(np.float32)
    x[:, :, 0, :] = np.inf  # the first row and last column: what outside taps are clamped to
    x[:, 1, :, -1] = np.nan
    edges = np.array([[-1.02, -0.3], [1.03, 0.2], [0.1, -1.04], [0.4, 1.01], [0.0, 0.0]])
    grid = np.tile(edges, (2, 1, 1, 1)).reshape(2, 1, 5, 2).astype(np.float32)
    model = gridsample_model(list(x.shape), list(grid.shape), mode, "zeros", align)
    assert plan_of(spec, x.shape, grid.shape, get_target(target)).masks
    lowered = lower(model, target=target, lower_all=True)
    assert "Pad" not in {node.op_type for node in lowered.graph.node}
    expected = oracle(spec, x, grid)
    np.testing.assert_array_equal(
        np.isnan(run_ort(lowered, {"X": x, "grid": grid})), np.isnan(expected)
    )
    assert_close(run_ort(lowered, {"X": x, "grid": grid}), expected, mode)


RUN_TIME_SPECS = [
    GridSampleSpec(r, m, "zeros", a)
    for r, m in [(1, "linear"), (2, "linear"), (2, "cubic"), (3, "linear"), (3, "cubic")]
    + [(r, "nearest") for r in (1, 2, 3)]
    for a in (0, 1)
]


RUN_TIME_CASES = [(spec, "onnxruntime") for spec in RUN_TIME_SPECS]


@pytest.mark.parametrize(
    ("spec", "target"),
    RUN_TIME_CASES,
    ids=[f"{t}-{s.label}".replace(" ", "-") for s, t in RUN_TIME_CASES],
)
def test_an_x_of_unknown_size_is_masked_or_padded_by_its_size_at_run_time(spec, target, rng):
    """X of symbolic size, a grid of static size (a warp to a fixed output): on the onnxruntime
    target an If picks, by X's size at run time, taps (nearest: values) masked once gathered,
    or X padded by a ring (nearest: a zero slot), which a small X or one with an empty axis
    takes (the openvino target masks them always: tests/test_openvino.py). Checked against the oracle on a large X and a tiny
    one, and against onnx.reference on an X with an empty axis (where onnxruntime's kernel
    refuses to run; nearest: the check's reference kernel, as onnx.reference fails there)."""
    r = spec.rank
    out = [3, 4, 5][:r]
    model = gridsample_model(
        ["N", "C", *[f"d{k}" for k in range(r)]],
        [2, *out, r],
        spec.mode,
        "zeros",
        spec.align_corners,
    )
    plan = plan_of(spec, ["N", "C", *["d"] * r], [2, *out, r], get_target(target))
    generic = plan_of(spec, ["N", "C", *["d"] * r], [2, *out, r], get_target("generic"))
    assert plan.masks_values and not plan.ring and generic.small_x is None
    assert plan.small_x.ring or plan.small_x.zero_slot
    lowered = lower(model, target=target, lower_all=True)
    ops = {node.op_type for node in lowered.graph.node}
    assert "If" in ops and "Pad" not in ops  # (the ring or the slot: in the If's branch)
    grid = make_grid(rng, (2, *out, r), far=True)
    # (past the threshold; 3-D not at 80x64x48, where onnx.reference's cubic took 8 s a case)
    large = {1: [80], 2: [80, 64], 3: [48, 32, 24]}[r]
    assert np.prod(large) >= costs.masked_min_spatial(plan.taps, int(np.prod(out)))
    for sizes in (large, [1, 2, 3][:r]):
        x = rng.standard_normal((2, 3, *sizes)).astype(np.float32)
        assert_close(run_ort(lowered, {"X": x, "grid": grid}), oracle(spec, x, grid), spec.mode)
    empty = np.zeros((2, 3, *[0, 5, 6][:r]), np.float32)
    if spec.mode == "nearest":  # (onnx.reference's nearest indexes the empty axis: IndexError)
        args = (spec.mode, spec.padding_mode, spec.align_corners)
        expected = grid_sample(empty, grid, *args).astype(np.float32)
    else:
        expected = run_onnx_reference(spec_model(spec, empty, grid), {"X": empty, "grid": grid})
    np.testing.assert_array_equal(run_ort(lowered, {"X": empty, "grid": grid}), expected)


PLANE_SPECS = [
    GridSampleSpec(r, m, p, a)
    for r in (1, 2, 3)
    for m in ("linear", "cubic", "nearest")
    for p in ("zeros", "border", "reflection")
    for a in (0, 1)
    if r == 2 or a == 0
]


@pytest.mark.parametrize("spec", PLANE_SPECS, ids=lambda s: s.label.replace(" ", "-"))
@pytest.mark.parametrize("target", ["litert", "generic", "openvino"])
def test_rows_from_planes_match_the_oracle(spec, target, rng):
    """One sample gathered from X's planes (``Plan.planes``), forced: far grids, NaN and
    infinite grid values and pixels, float and integer index arithmetic; no Transpose left."""
    x = rng.standard_normal((1, 3, *[5, 4, 6][: spec.rank])).astype(np.float32)
    x.reshape(-1)[[5, 13]] = [np.inf, -np.inf]
    grid = make_grid(rng, (1, *[3, 4, 2][: spec.rank], spec.rank), far=True)
    grid.reshape(-1)[:3] = [np.nan, np.inf, -np.inf]
    force = {"gather": "rows", "planes": True}
    plan = plan_of(spec, list(x.shape), list(grid.shape), get_target(target), force=dict(force))
    assert plan.planes
    rule = GridSampleLowering.rule(target=target, planner=_forced(force))
    lowered = rewriter.rewrite(spec_model(spec, x, grid), [rule])
    if target == "litert":  # the grid is read by Gather, X as it is: nothing to transpose
        assert "Transpose" not in {node.op_type for node in lowered.graph.node}
    expected = grid_sample(x, grid, spec.mode, spec.padding_mode, spec.align_corners)
    assert_close(run_ort(lowered, {"X": x, "grid": grid}), expected, spec.mode)


@pytest.mark.parametrize("spec", PLANE_SPECS, ids=lambda s: s.label.replace(" ", "-"))
def test_planes_of_several_samples_match_the_oracle(spec, rng):
    """The openvino target gathers several samples from X's planes side by side, ``(C, N*S)``
    (``Plan.planes`` with batch 2, its chosen form for 3 channels), the ReduceSum of 8+ taps
    (``(C, N, T.., P)``) too."""
    x = rng.standard_normal((2, 3, *[5, 4, 6][: spec.rank])).astype(np.float32)
    x.reshape(-1)[[5, 13, 20]] = [np.inf, -np.inf, np.nan]
    grid = make_grid(rng, (2, *[3, 4, 2][: spec.rank], spec.rank), far=True)
    grid.reshape(-1)[:3] = [np.nan, np.inf, -np.inf]
    plan = plan_of(spec, list(x.shape), list(grid.shape), get_target("openvino"))
    assert plan.planes, plan.describe()
    lowered = rewriter.rewrite(
        spec_model(spec, x, grid), [GridSampleLowering.rule(target="openvino")]
    )
    expected = grid_sample(x, grid, spec.mode, spec.padding_mode, spec.align_corners)
    assert_close(run_ort(lowered, {"X": x, "grid": grid}), expected, spec.mode)


# CHAIN_MAX_SAMPLE_VALUES = 2**19: where OpenVINO keeps float32 (its tail, a fenced Loop), 8+
# taps chain while one sample's X holds at most this many values, and one ReduceSum past it
CHAINED_CASES = [  # (why, spec, x_shape, grid_shape, where, sum)
    ("cubic in the tail", CUBIC, [1, 32, 128, 128], _points(64), {"tail": True}, "chain"),
    ("past 2**19", CUBIC, [1, 32, 128, 129], _points(64), {"tail": True}, "reduce_sum"),
    ("two samples", CUBIC, [2, 32, 16, 16], _points(64), {"tail": True}, "reduce_sum"),
    ("3-D linear", GridSampleSpec(3, "linear", "zeros", 0), [1, 16, 24, 24, 24], [1, 4, 4, 4, 3],
     {"tail": True}, "chain"),
    ("fenced", CUBIC, [1, 32, 24, 24], [1, "P", 1, 2], {"grid_from": "computed"}, "chain"),
    ("not kept in float32", CUBIC, [1, 32, 24, 24], _points(64), {}, "reduce_sum"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("why", "spec", "x_shape", "grid_shape", "where", "combine"),
    CHAINED_CASES,
    ids=[case[0] for case in CHAINED_CASES],
)
def test_taps_chain_where_openvino_keeps_float32_and_x_stays_near_the_caches(
    why, spec, x_shape, grid_shape, where, combine
):
    """OpenVINO splits a chain of 8+ taps, storing partial sums in bfloat16 at its default
    precision, so rows of 8+ taps take one ReduceSum; not where it keeps float32, while one
    sample's X is small enough that the chain's fused Adds run faster (``costs.float32_chain_pays``)."""
    plan = plan_of(spec, x_shape, grid_shape, get_target("openvino"), **where)
    assert plan.rows, plan.describe()
    assert plan.sum == combine, plan.why.get("sum")
    assert plan.float32_kept == ("tail" in where or plan.fenced)


SYMBOLIC_X = ["N", 3, "H", "W"]
MERGED_CASES = [  # (why, spec, x_shape, grid_shape, where, merged)
    ("a stored grid", LINEAR, SYMBOLIC_X, ["N", 8, 8, 2], {"grid_from": "stored"}, True),
    ("in the float32 tail", LINEAR, SYMBOLIC_X, ["N", 8, 8, 2], {"tail": True}, True),
    ("cubic, stored", CUBIC, SYMBOLIC_X, ["N", 8, 8, 2], {"grid_from": "stored"}, True),
    ("cubic in the tail: planar", CUBIC, SYMBOLIC_X, ["N", 8, 8, 2], {"tail": True}, False),
    ("a grid read in float32", LINEAR, SYMBOLIC_X, ["N", 8, 8, 2], {}, False),
    ("static sizes", LINEAR, [1, 3, 8, 8], [1, 8, 8, 2], {"grid_from": "stored"}, False),
    ("nearest", NEAREST, SYMBOLIC_X, ["N", 8, 8, 2], {"grid_from": "stored"}, True),
    ("nearest in the tail: planar", NEAREST, SYMBOLIC_X, ["N", 8, 8, 2], {"tail": True}, False),
]


FLAT_CASES = [  # (why, spec, x_shape, grid_shape, where, flat_points)
    ("one column, in the tail", CUBIC, SYMBOLIC_X, ["N", "P", 1, 2], {"tail": True}, True),
    ("a short last axis", NEAREST, SYMBOLIC_X, ["N", "H", 40, 2], {"tail": True}, True),
    ("a long last axis", NEAREST, SYMBOLIC_X, ["N", "H", 64, 2], {"tail": True}, False),
    ("a symbolic last axis", NEAREST, SYMBOLIC_X, ["N", "H", "W", 2], {"tail": True}, False),
    ("static sizes", CUBIC, [1, 3, 8, 8], [1, 16, 1, 2], {"tail": True}, False),
    ("fenced: planar", CUBIC, SYMBOLIC_X, ["N", "P", 1, 2], {"grid_from": "computed"}, True),
    ("stored: merged instead", CUBIC, SYMBOLIC_X, ["N", "P", 1, 2], {"grid_from": "stored"}, False),
]


FLAT_GRID_CASES = [  # (why, spec, x_shape, grid_shape, where, flat_grid)
    ("a grid of shapes", LINEAR, SYMBOLIC_X, ["N", 7, 7, 2], {"grid_from": "shapes"}, True),
    ("a stored grid", CUBIC, SYMBOLIC_X, ["N", 7, 5, 2], {"grid_from": "stored"}, True),
    ("a symbolic point axis", LINEAR, SYMBOLIC_X, ["N", "Q", 4, 2], {"grid_from": "stored"}, False),
    ("a long last axis", LINEAR, SYMBOLIC_X, ["N", 7, 64, 2], {"grid_from": "stored"}, False),
    ("one row already", LINEAR, SYMBOLIC_X, ["N", 1, 40, 2], {"grid_from": "stored"}, False),
    ("static sizes", LINEAR, [1, 3, 8, 8], [1, 7, 7, 2], {"grid_from": "shapes"}, False),
    ("a grid from an input: planar", LINEAR, SYMBOLIC_X, ["N", 7, 7, 2], {}, False),
    ("planar in the tail", NEAREST, SYMBOLIC_X, ["N", 7, 7, 2], {"tail": True}, False),
]


FIRST_CASES = [  # (why, spec, x_shape, grid_shape, where, components_first)
    ("a stored grid", LINEAR, SYMBOLIC_X, ["N", "H", "W", 2], {"grid_from": "stored"}, True),
    ("static sizes too", LINEAR, [1, 3, 8, 8], [1, 48, 64, 2], {"grid_from": "stored"}, True),
    ("linear in the tail", LINEAR, SYMBOLIC_X, ["N", "H", "W", 2], {"tail": True}, True),
    ("a grid read in float32", LINEAR, SYMBOLIC_X, ["N", "H", "W", 2], {}, False),
    ("a computed grid", LINEAR, SYMBOLIC_X, ["N", "H", "W", 2], {"grid_from": "computed"}, False),
    ("a grid of shapes", LINEAR, SYMBOLIC_X, ["N", "H", "W", 2], {"grid_from": "shapes"}, False),
    ("a short last axis", LINEAR, SYMBOLIC_X, ["N", "H", 40, 2], {"grid_from": "stored"}, False),
    ("cubic in the tail: planar", CUBIC, SYMBOLIC_X, ["N", "H", "W", 2], {"tail": True}, False),
]


FENCED_CASES = [  # (why, spec, x_shape, grid_shape, where, fenced)
    ("a stored grid", LINEAR, SYMBOLIC_X, ["N", 8, 8, 2], {"grid_from": "stored"}, True),
    ("a computed grid", NEAREST, SYMBOLIC_X, ["N", 8, 8, 2], {"grid_from": "computed"}, True),
    ("a grid of shapes", CUBIC, SYMBOLIC_X, ["N", 8, 8, 2], {"grid_from": "shapes"}, True),
    ("linear from an input", LINEAR, SYMBOLIC_X, ["N", 8, 8, 2], {}, True),
    ("nearest from an input", NEAREST, SYMBOLIC_X, ["N", 8, 8, 2], {}, True),
    ("in the float32 tail", LINEAR, SYMBOLIC_X, ["N", 8, 8, 2], {"tail": True}, False),
    ("static sizes", LINEAR, [1, 3, 8, 8], [1, 8, 8, 2], {"grid_from": "stored"}, False),
]


INTERLEAVED_CASES = [  # (why, spec, x_shape, grid_shape, where, interleaved)
    ("static sizes", LINEAR, [1, 3, 8, 8], [1, 8, 8, 2], {}, True),
    ("computed, fenced", LINEAR, SYMBOLIC_X, ["N", 8, 8, 2], {"grid_from": "computed"}, False),
    ("a grid from an input, fenced", CUBIC, SYMBOLIC_X, ["N", 8, 8, 2], {}, False),
    ("a stored grid, fenced", LINEAR, SYMBOLIC_X, ["N", 8, 8, 2], {"grid_from": "stored"}, True),
    ("of shapes, fenced", LINEAR, SYMBOLIC_X, ["N", 8, 8, 2], {"grid_from": "shapes"}, True),
    ("nearest from an input, fenced", NEAREST, SYMBOLIC_X, ["N", 8, 8, 2], {}, False),
    ("linear in the tail", LINEAR, SYMBOLIC_X, ["N", 8, 8, 2], {"tail": True}, True),
    ("cubic in the tail, static", CUBIC, [1, 3, 8, 8], [1, 8, 8, 2], {"tail": True}, True),
    ("cubic in the tail, symbolic", CUBIC, SYMBOLIC_X, ["N", 8, 8, 2], {"tail": True}, False),
    ("nearest in the tail, static", NEAREST, [1, 3, 8, 8], [1, 8, 8, 2], {"tail": True}, False),
]


KEPT_CASES = [  # (why, spec, x_shape, grid_shape, where, float32_kept)
    ("fenced", LINEAR, SYMBOLIC_X, ["N", 8, 8, 2], {"grid_from": "stored"}, True),
    ("in the float32 tail", LINEAR, [1, 3, 8, 8], [1, 8, 8, 2], {"tail": True}, True),
    ("static sizes", LINEAR, [1, 3, 8, 8], [1, 8, 8, 2], {"grid_from": "stored"}, False),
    ("nearest from an input, fenced", NEAREST, SYMBOLIC_X, ["N", 8, 8, 2], {}, True),
]


OPENVINO_FORMS = [
    *[("interleaved", *case) for case in INTERLEAVED_CASES],
    *[("float32_kept", *case) for case in KEPT_CASES],
    *[("merged", *case) for case in MERGED_CASES],
    *[("flat_points", *case) for case in FLAT_CASES],
    *[("flat_grid", *case) for case in FLAT_GRID_CASES],
    *[("components_first", *case) for case in FIRST_CASES],
    *[("fenced", *case) for case in FENCED_CASES],
]


@pytest.mark.parametrize(
    ("field", "why", "spec", "x_shape", "grid_shape", "where", "taken"),
    OPENVINO_FORMS,
    ids=[f"{case[0]}: {case[1]}" for case in OPENVINO_FORMS],
)
def test_openvinos_forms_are_taken_where_they_pay_and_are_safe(
    field, why, spec, x_shape, grid_shape, where, taken
):
    """Only the openvino target's. ``plan.interleaved`` (bfloat16-safe): not where OpenVINO
    keeps float32 (``plan.float32_kept``: the tail, a fenced Loop's body) and planar pays:
    nearest in the tail, cubic there with symbolic sizes (static: its whole interleaved
    weights ran 1.82 -> 1.23x); a fenced computed grid or one from the inputs, run op by op
    (r components innermost: 3.7 -> 1.8x native). A fenced stored grid keeps its components
    first; a fenced grid of shapes stays (planar, OpenVINO 2026.4 failed to compile RAFT
    reshaped to static sizes). ``plan.merged``: symbolic sizes (OpenVINO runs them op by
    op, 12x slower with the grid's 2 components innermost), a grid stored before it is read
    or in the float32 tail (the Reshape is stored too, in bfloat16 at OpenVINO's default
    precision). ``plan.flat_points``: planar coordinates (nearest and cubic in the float32
    tail) of symbolic sizes whose output's last axis is static and short
    (``Target.short_innermost``), where OpenVINO's kernels of symbolic sizes run near scalar.
    ``plan.flat_grid``: merged coordinates of a grid whose points are static and whose last
    axis is short, lowered on the grid as (N, 1.., P, r) (RAFT's lookups); not where a point
    axis is symbolic (its Reshape's sizes cost more than it saves).
    ``plan.components_first``: a grid stored before it is read
    (or in the float32 tail) loses nothing by a Transpose first, and then no coordinate is
    transposed after; not one OpenVINO would read in float32, nor one of shapes, nor a short
    last axis (merged instead where sizes are symbolic). ``plan.fenced``: OpenVINO runs
    symbolic sizes op by op, storing bfloat16, but keeps each graph's tail in float32, a Loop's
    body too, which a grid read straight from the model's inputs enters in float32; not where
    its fused kernels or its tail keep float32 already."""
    plan = plan_of(spec, x_shape, grid_shape, get_target("openvino"), **where)
    assert getattr(plan, field) == taken, plan.why.get(field)
    assert not (plan.components_first and plan.merged)
    assert ("in a float32 Loop" in plan.describe()) == plan.fenced
    assert not getattr(plan_of(spec, x_shape, grid_shape, get_target("generic"), **where), field)


def test_an_x_of_unknown_size_is_masked_without_an_if_and_its_grid_merged():
    """An X of unknown size, a static grid: the openvino target masks the taps with no If by
    X's size (OpenVINO copies what an If's branch reads), and merges a grid computed at run
    time or made of constants and shapes alone (as RAFT's lookups: folded once sizes are
    static, run op by op until then; merged in an If's branch, OpenVINO 2026.4 failed to
    compile RAFT's first lookup reshaped to static sizes)."""
    target = get_target("openvino")
    for where in ({"tail": True}, {"grid_from": "shapes", "tail": True}, {"grid_from": "shapes"}):
        plan = plan_of(LINEAR_ZEROS, SYMBOLIC_X, [2, 10, 12, 2], target, **where)
        assert plan.small_x is None and plan.masks and not plan.ring
        assert plan.merged, plan.why.get("merged")


@pytest.mark.parametrize(
    ("producers", "merged"),
    [
        (["AffineGrid"], True),
        (["Concat"], True),
        (["Add"], False),
        ([], False),
        (["Shape"], True),
        (["Concat", "Cast16", "Cast"], True),
        (["Cast16", "Cast"], False),
        (["Concat", "CastInt", "Cast"], False),
    ],
)
def test_where_the_grid_comes_from_decides_the_merge(producers, merged):
    """``node_plan`` judges where the grid comes from: a graph input, or an elementwise op that
    OpenVINO would fuse with the coordinates' kernel, is read in float32; others are stored;
    one made of shapes and constants alone (an AffineGrid of a constant theta and X's shape)
    folds once sizes are static, and runs op by op until then. Casts between floats are looked through (a float16 model's
    grid); a Cast from integers is an elementwise op like any other."""
    x = ir.Value(name="X", shape=ir.Shape(SYMBOLIC_X), type=ir.TensorType(ir.DataType.FLOAT))
    g = ir.Value(name="g", shape=ir.Shape(["N", 8, 8, 2]), type=ir.TensorType(ir.DataType.FLOAT))
    grid = g
    casts = {"Cast16": ir.DataType.FLOAT16, "Cast": ir.DataType.FLOAT, "CastInt": ir.DataType.INT32}
    for producer in producers:
        if producer == "Shape":
            eye = ir.tensor(np.eye(2, 3, dtype=np.float32)[None])
            theta = ir.Value(name="theta", const_value=eye)
            grid = ir.node("AffineGrid", [theta, ir.node("Shape", [x]).outputs[0]]).outputs[0]
        elif producer in casts:
            grid = ir.node("Cast", [grid], attributes={"to": casts[producer]}).outputs[0]
        else:
            inputs = [grid] if producer == "AffineGrid" else [grid, grid]
            grid = ir.node(producer, inputs).outputs[0]
        dtype = casts.get(producer, ir.DataType.FLOAT)
        grid.shape, grid.type = g.shape, ir.TensorType(dtype)
    node = ir.node("GridSample", [x, grid], attributes={"mode": "linear"})
    plan = node_plan(LINEAR, node, get_target("openvino"))
    assert plan.merged == merged, plan.why.get("merged")
