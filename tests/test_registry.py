"""The registry is the one list of what works: it feeds the CLI, README and the tests."""

from __future__ import annotations

import pathlib

import pytest

from gridsample_lower import registry
from gridsample_lower.spec import ALIGN_CORNERS, MODES, PADDING_MODES


def test_every_configuration_is_supported():
    specs = registry.supported_specs()
    assert len(specs) == len(registry.TESTED_RANKS) * len(MODES) * len(PADDING_MODES) * len(
        ALIGN_CORNERS
    )


def test_a_mode_cannot_be_registered_twice():
    registry.lookup(registry.supported_specs()[0])
    with pytest.raises(ValueError, match="already registered"):
        registry.register("linear")(lambda *a: None)


def test_readme_shows_the_current_support_matrix():
    readme = (pathlib.Path(__file__).parents[1] / "README.md").read_text()
    assert registry.support_matrix() in readme
