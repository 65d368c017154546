"""Pin the public API: what users import must not vanish by accident."""

import gridsample_lower


def test_public_names():
    assert sorted(gridsample_lower.__all__) == sorted(
        [
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
    )
    for name in gridsample_lower.__all__:
        assert hasattr(gridsample_lower, name)
