"""Text for people: tables line up, and errors fit on one line."""

from gridsample_lower.text import one_line, table


def test_table_pads_every_column_to_its_widest_cell():
    text = table([{"name": "a", "mode": "linear"}, {"name": "long_name", "mode": "cubic"}])
    assert text.splitlines() == ["name       mode", "a          linear", "long_name  cubic"]


def test_one_line_joins_a_checkers_lines_and_shortens_from_the_end():
    error = ValueError("Field 'shape' of 'type' is required\n\n  but missing.\n")
    assert one_line(error) == "Field 'shape' of 'type' is required but missing."
    assert one_line(ValueError("x" * 300), limit=10) == "xxxxxxx..."
    assert one_line(KeyError()) == "KeyError"


def test_one_line_tail_keeps_a_runtimes_reason_at_the_end():
    error = RuntimeError("[ONNXRuntimeError] : 2 : " + "v" * 300 + " Invalid rank\nstack")
    line = one_line(error, limit=20, tail=True)
    assert line == "..." + ("v" * 300 + " Invalid rank")[-20:]
    assert "stack" not in line
