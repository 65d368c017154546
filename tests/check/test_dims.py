"""Sizes for symbolic dimensions: expressions read safely, symbols bound, defaults real models take."""

from __future__ import annotations

import pytest

from gridsample_lower.check.dims import BUDGET, IMAGE_SIZE, OTHER_SIZE, Dims, symbols_of


@pytest.mark.parametrize(
    "name,symbols",
    [
        ("batch", ["batch"]),
        ("32*h32", ["h32"]),
        ("floor(s0/2) + 1", ["s0"]),
        ("Max(1, s0 - s1)", ["s0", "s1"]),
        ("unk__12", ["unk__12"]),
        ("batch size", ["batch size"]),  # not an expression: a name
        ("__import__('os').getcwd()", ["__import__('os').getcwd()"]),  # never run
    ],
)
def test_symbols_of_a_dimension_name(name, symbols):
    assert symbols_of(name) == symbols


def test_a_name_is_never_run_as_code(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    dims = Dims(["open('pwned', 'w').write('x')", "(lambda: 1)()", "2**10**10"])
    dims.choose(lambda: 0)
    for name in dims.names:
        assert dims.size(name) == OTHER_SIZE
    assert not (tmp_path / "pwned").exists()


def test_a_symbol_sizes_every_expression_of_it():
    dims = Dims(["32*h32", "h32", "floor(h32/2)", "h32 + 1"], given={"h32": 5})
    assert [dims.size(n) for n in dims.names] == [160, 5, 2, 6]
    assert dims.chosen == {}


def test_a_dimension_may_be_sized_as_written():
    dims = Dims(["32*h32"], given={"32*h32": 96})
    assert dims.size("32*h32") == 96


def test_given_arrays_bind_the_symbols_they_show():
    dims = Dims(["N", "32*h32", "w32"], shown={"N": 4, "32*h32": 160})
    dims.choose(lambda: 0)
    assert dims.values["h32"] == 5 and dims.size("N") == 4
    assert dims.chosen == {"w32": OTHER_SIZE}


def test_given_sizes_that_disagree_are_refused():
    with pytest.raises(ValueError, match="'N' is 5 by dims"):
        Dims(["N"], given={"N": 5}, shown={"N": 1})
    with pytest.raises(ValueError, match="'2\\*h' is 7 in a given input, 6"):
        Dims(["h", "2*h"], shown={"h": 3, "2*h": 7})


def test_an_unknown_name_is_refused():
    with pytest.raises(KeyError, match="btach"):
        Dims(["batch", "32*h"], given={"btach": 2})


def test_image_axes_get_a_size_every_stride_divides():
    """128 along image axes (RAFT and feature pyramids divide by 8 to 64), 3 elsewhere; an axis
    written 32*h gets h = 4: 128 pixels."""
    dims = Dims(["N", "H", "W", "32*h", "S"], image=["H", "W", "32*h"])
    dims.choose(lambda: 0)
    assert dims.values == {
        "N": OTHER_SIZE,
        "S": OTHER_SIZE,
        "H": IMAGE_SIZE,
        "W": IMAGE_SIZE,
        "h": 4,
    }
    assert dims.size("32*h") == 128
    assert dims.describe() == "N=3, H=128, W=128, h=4, S=3"  # in the order of the names


def test_image_axes_are_halved_while_inputs_are_too_large():
    dims = Dims(["D", "H", "W"], image=["D", "H", "W"])
    dims.choose(lambda: 64 * dims.size("D") * dims.size("H") * dims.size("W"))
    assert dims.values == {"D": 32, "H": 32, "W": 32}  # 64 * 32**3 = 2**21 <= BUDGET
    assert 64 * 32**3 <= BUDGET < 64 * 64**3


def test_what_a_size_may_be_given_for():
    assert Dims(["N", "32*h", "h + w"]).sizable() == ["32*h", "N", "h + w", "h", "w"]
