"""The command line starts light: --help and --version load neither onnx nor numpy."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gridsample_lower.cli.main import COMMANDS, main

PROBE = """
import sys
from gridsample_lower.cli.main import main
try:
    main([{flag!r}], prog_name="gridsample-lower")
except SystemExit:
    pass
heavy = sorted(m for m in ("onnx", "numpy", "onnx_ir", "onnxruntime", "sympy") if m in sys.modules)
print("loaded:", heavy)
"""


@pytest.mark.parametrize("flag", ["--help", "--version"])
def test_help_and_version_load_no_heavy_module(flag):
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(flag=flag)], capture_output=True, text=True, check=True
    ).stdout
    assert out.splitlines()[-1] == "loaded: []", out


def test_the_listed_first_lines_are_the_commands_own():
    for name, (_, first) in COMMANDS.items():
        command = main.get_command(None, name)
        assert command is not None and command.name == name
        assert command.help.strip().splitlines()[0] == first


def test_python_dash_m_runs_the_command_line():
    out = subprocess.run(
        [sys.executable, "-m", "gridsample_lower", "--version"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.startswith("gridsample-lower, version ")
