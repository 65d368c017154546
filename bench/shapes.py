"""The shapes every speed benchmark measures: bench/run.py's, shared by the runtime scripts."""

SHAPES_2D = [  # (N, C, H, W), output (H_out, W_out)
    ((1, 3, 224, 224), (224, 224)),
    ((1, 64, 64, 64), (64, 64)),
    ((1, 256, 32, 32), (32, 32)),
    ((8, 32, 64, 64), (64, 64)),
    ((1, 32, 128, 128), (1, 4096)),
]
SHAPE_3D = ((1, 16, 24, 24, 24), (24, 24, 24))
