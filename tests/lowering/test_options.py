"""One options type: lower()'s keywords, the CLI's flags and LoweringOptions cannot drift apart."""

from __future__ import annotations

import dataclasses
import inspect

import pytest
from conftest import one_warp

from gridsample_lower import LoweringOptions, lower, lower_with_report
from gridsample_lower.cli.main import main


def test_lower_takes_exactly_the_options_with_their_defaults():
    parameters = inspect.signature(lower).parameters
    keywords = {name: p.default for name, p in parameters.items() if p.kind is p.KEYWORD_ONLY}
    fields = {field.name: field.default for field in dataclasses.fields(LoweringOptions)}
    assert keywords == fields


@pytest.mark.parametrize("command", ["lower", "inspect"])
def test_the_command_line_has_a_flag_for_every_option(command):
    flags = {param.name for param in main.get_command(None, command).params}
    fields = {field.name for field in dataclasses.fields(LoweringOptions)}
    expected = fields if command == "lower" else fields - {"as_functions", "strict"}
    assert expected - {"strict"} <= flags  # (lower always refuses what it cannot lower)


def test_options_or_keywords_lower_the_same():
    model = one_warp()
    by_value, report = lower_with_report(model, LoweringOptions(modes=["bilinear"]))
    assert report == {"r2 linear zeros align_corners=0": 1}
    by_keywords, _ = lower_with_report(model, modes="bilinear")
    assert by_value.SerializeToString() == by_keywords.SerializeToString()
    assert lower(model, target="onnxruntime").graph.node[0].op_type == "GridSample"  # kept


def test_take_pops_the_options_and_leaves_the_rest():
    flags = {"target": "webnn", "ranks": (2,), "report_path": None}
    options = LoweringOptions.take(flags, as_functions=True)
    assert flags == {"report_path": None}
    assert (options.target, options.ranks, options.as_functions) == ("webnn", (2,), True)
