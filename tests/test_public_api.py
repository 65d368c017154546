"""Pin the public API: what users import must not vanish by accident."""

import gridsample_lower


def test_public_names():
    assert sorted(gridsample_lower.__all__) == sorted(
        [
            "TARGETS",
            "GridSampleLowering",
            "GridSampleSpec",
            "LowerGridSamplePass",
            "LoweringOptions",
            "LoweringResult",
            "NodeCheck",
            "OpsetConversionError",
            "OutputCheck",
            "Target",
            "UnsupportedGridSample",
            "VerificationError",
            "VerificationReport",
            "VerificationSetupError",
            "__version__",
            "downgrade",
            "gridsample_rule",
            "lower",
            "lower_with_report",
            "model_io",
            "supported_specs",
            "upgrade",
            "verify",
        ]
    )
    for name in gridsample_lower.__all__:
        assert hasattr(gridsample_lower, name)
    assert callable(gridsample_lower.verify)  # the function, not the submodule
