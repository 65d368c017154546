"""``gridsample-lower verify`` and the check ``lower`` runs before writing, run as a user runs them.

(Not ``test_verify.py``: tests/test_verify.py holds that module name, and test modules here
are imported by their base name.)
"""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from conftest import (
    gridsample_model,
    inspect_rows,
    needs_real_sizes,
    sensitive_to_rounding,
    two_warps,
)
from test_main import EXAMPLE, cli

from gridsample_lower import lower
from gridsample_lower.cli.common import Progress
from gridsample_lower.cli.main import main


def in_process(*args):
    """The command run in this process: for usage errors, where starting Python dominates."""
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture
def warps(tmp_path):
    """Paths of the two-warp reference, its lowering, and an impostor wrong in warp_b."""
    paths = [tmp_path / name for name in ("ref.onnx", "good.onnx", "bad.onnx")]
    for path, model in zip(
        paths, [two_warps(), lower(two_warps()), lower(two_warps(padding_b="border"))], strict=True
    ):
        onnx.save(model, path)
    return paths


def test_a_correct_candidate_passes_with_a_report(warps, tmp_path):
    ref, good, _ = warps
    result = cli("verify", ref, good, "--samples", "2", "--report", tmp_path / "r.json")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split()[:3] == ["output", "dtype", "shape"]
    assert any(line.startswith("warp_b ") and line.endswith(" ok") for line in lines)
    assert lines[-1] == (
        "verified against onnxruntime on 2 input set(s): 1 output(s) and 2 GridSample node(s) match"
    )
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["ok"] and report["samples"] == 2 and len(report["nodes"]) == 2


def test_a_wrong_candidate_fails_and_names_the_node(warps, tmp_path):
    ref, _, bad = warps
    result = cli("verify", ref, bad, "--report", tmp_path / "r.json")
    assert result.returncode == 1, result.stderr
    assert any(
        line.startswith("warp_b ") and "MISMATCH" in line for line in result.stdout.splitlines()
    )
    assert "responsible: 'warp_b'" in result.stdout.splitlines()[-1]
    assert json.loads((tmp_path / "r.json").read_text())["ok"] is False
    quiet = in_process("verify", ref, bad, "-q")
    assert quiet.exit_code == 1 and len(quiet.stdout.splitlines()) == 1


def test_inputs_from_npz_and_npy_and_tolerance_overrides(warps, tmp_path, rng):
    ref, _, bad = warps
    grid = rng.uniform(-1, 1, (1, 3, 4, 2)).astype(np.float32)
    np.savez(tmp_path / "feeds.npz", X=rng.standard_normal((1, 2, 5, 6)).astype(np.float32))
    np.save(tmp_path / "grid_a.npy", grid)
    np.save(tmp_path / "grid_b.npy", grid)
    given = ["--inputs", tmp_path / "feeds.npz", "--inputs", f"grid_a:{tmp_path / 'grid_a.npy'}"]
    given += ["--inputs", f"grid_b:{tmp_path / 'grid_b.npy'}"]
    loose = ["--atol", "1e-3", "--atol", "out:100", "--atol", "warp_b:100"]
    result = cli("verify", ref, bad, *given, *loose)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "on 1 input set(s)" in result.stdout  # all inputs given: one run is enough
    assert " 100 " in result.stdout and " 0.001 " in result.stdout


@pytest.mark.parametrize(
    "args,message",
    [
        (["--inputs", "nowhere.npz"], "nowhere.npz: no such file"),
        (["--inputs", "X:nowhere.npy"], "expected FILE.npz or NAME:FILE.npy"),
        (["--atol", "loose"], "expected [NAME:]VALUE"),
        (["--atol", "nothing:1"], "no output or GridSample node named 'nothing'"),
        (["--dim", "N=2"], "no symbolic dimension or symbol 'N'"),
        (["--samples", "0"], "--samples"),
    ],
)
def test_bad_usage_is_exit_2(warps, args, message):
    ref, good, _ = warps
    result = in_process("verify", ref, good, *args)
    assert result.exit_code == 2 and message in result.stderr, result.stderr
    assert len(result.stderr.splitlines()) == 1
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_unreadable_model_is_exit_2(warps, tmp_path):
    (tmp_path / "junk.onnx").write_bytes(b"\x00\xff junk")
    result = in_process("verify", warps[0], tmp_path / "junk.onnx")
    assert result.exit_code == 2 and "not a readable ONNX model" in result.stderr


def test_a_reference_onnxruntime_cannot_run_with_symbolic_dims(tmp_path):
    model = gridsample_model(["N", 2, 5], ["N", 4, 1], "cubic", "reflection", 1)
    onnx.save(model, tmp_path / "ref.onnx")
    onnx.save(lower(model), tmp_path / "low.onnx")
    result = cli("verify", tmp_path / "ref.onnx", tmp_path / "low.onnx", "--dim", "N=2")
    assert result.returncode == 0, result.stderr
    assert "[2,2,4]" in result.stdout and "verified against onnx.reference" in result.stdout


def test_lower_refuses_to_write_on_a_mismatch(tmp_path):
    out = tmp_path / "out.onnx"
    result = cli("lower", EXAMPLE, "-o", out, "--atol", "0", "--rtol", "0", "--samples", "1")
    assert result.returncode == 1 and not out.exists()
    assert "flow_warp" in result.stdout and "MISMATCH" in result.stdout  # the report
    assert "nothing written" in result.stderr and len(result.stderr.splitlines()) == 1


def test_lower_writes_the_report_and_no_verify_skips(tmp_path):
    out, report = tmp_path / "out.onnx", tmp_path / "report.json"
    result = cli("lower", EXAMPLE, "-o", out, "--samples", "1", "--report", report)
    assert result.returncode == 0, result.stderr
    assert json.loads(report.read_text())["ok"] and out.exists()
    assert "2 GridSample node(s) match" in result.stdout
    skipped = in_process("lower", EXAMPLE, "-o", out, "--no-verify")
    assert skipped.exit_code == 0 and "not verified (--no-verify)" in skipped.stdout
    both = in_process("lower", EXAMPLE, "-o", out, "--no-verify", "--report", report)
    assert both.exit_code == 2 and "--report needs the check" in both.stderr


def test_progress_shows_on_stderr_once_a_check_runs_long(capsys):
    Progress(quiet=False, after=3600)(1, 8, "sample 1: candidate")
    assert capsys.readouterr().err == ""  # a short check stays silent
    progress = Progress(quiet=False, after=0)
    progress(1, 8, "sample 1: candidate")
    progress(2, 8, "sample 1: GridSample 'warp_a'")  # within 2 s of the last line: skipped
    progress.close()
    assert capsys.readouterr().err == "verifying 1/8: sample 1: candidate\n"


@pytest.fixture
def symbolic(tmp_path):
    """Paths of a model with a symbolic batch N and of its lowering."""
    model = gridsample_model(["N", 2, 5, 6], ["N", 3, 4, 2])
    paths = tmp_path / "ref.onnx", tmp_path / "low.onnx"
    onnx.save(model, paths[0])
    onnx.save(lower(model), paths[1])
    return paths


@pytest.mark.parametrize(
    "args,message",
    [
        (["--seed", "-1"], "seed must be at least 0, not -1"),
        (["--dim", "N=99999999999"], "inputs too large to invent"),
        (["--dim", "N=0"], "the size of dimension 'N' must be at least 1, not 0"),
        (["--rtol", "1e400"], "rtol must be finite and >= 0, not inf"),
        (["--inputs", "objects.npz"], "objects.npz: not readable"),
        (["--inputs", "renamed.npz"], "renamed.npz: not an .npz archive"),
    ],
)
def test_bad_values_are_one_line_and_exit_2(symbolic, tmp_path, args, message):
    np.savez(tmp_path / "objects.npz", X=np.array([1, "a", None], dtype=object))
    np.save(tmp_path / "plain.npy", np.zeros((1, 2, 5, 6), np.float32))
    (tmp_path / "plain.npy").rename(tmp_path / "renamed.npz")
    result = cli("verify", *symbolic, *args, cwd=tmp_path)
    assert result.returncode == 2 and result.stderr.startswith(f"error: {message}")
    assert len(result.stderr.splitlines()) == 1, result.stderr  # no warning, no traceback


def test_onnxruntime_logs_nothing_on_stderr(symbolic, tmp_path):
    model = onnx.load(symbolic[0])
    (mode,) = [a for a in model.graph.node[0].attribute if a.name == "mode"]
    mode.s = b"quintic"  # onnxruntime refuses it, and logs why
    onnx.save(model, tmp_path / "bad.onnx")
    result = cli("verify", symbolic[0], tmp_path / "bad.onnx", "-q")
    assert result.returncode == 1 and result.stderr == ""
    assert "quintic" in result.stdout
    x = np.zeros((1, 2, 5, 6), np.float32)
    np.save(tmp_path / "x.npy", x)
    result = cli("verify", *symbolic, "--inputs", f"X:{tmp_path / 'x.npy'}", "--dim", "N=5")
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1, result.stderr


def test_dim_takes_a_symbol_of_an_expression_and_lower_explains_a_model_it_cannot_run(tmp_path):
    """--dim h=3 sizes a dimension written 32*h; a grid the model makes infinite at the sizes
    given is said, with the way out, and each node is checked alone (exit 0)."""
    expression = tmp_path / "expr.onnx"
    onnx.save(gridsample_model([1, 2, "32*h", 64], [1, "h", 4, 2], "nearest"), expression)
    result = in_process("lower", expression, "-o", tmp_path / "e.onnx", "--dim", "h=3")
    assert result.exit_code == 0 and "1 output(s) and 1 GridSample node(s) match" in result.stdout
    sizes = tmp_path / "sizes.onnx"
    onnx.save(needs_real_sizes(), sizes)
    out = tmp_path / "s.onnx"
    result = in_process("lower", sizes, "-o", out, "--dim", "H=9", "--dim", "W=12", "--no-check")
    assert result.exit_code == 0 and out.exists(), result.stderr
    assert "'warp' holds NaN or infinity on invented inputs (N=3, H=9, W=12)" in result.stdout
    assert "--dim SYMBOL=N" in result.stdout and "checked alone" in result.stdout


def test_inspect_says_onnxruntime_runs_float16(tmp_path):
    """It runs float16 through its float32 kernel: the native column tries the kernel."""
    path = tmp_path / "half.onnx"
    onnx.save(
        gridsample_model([1, 2, 5, 6], [1, 3, 4, 2], x_dtype=np.float16, grid_dtype=np.float16),
        path,
    )
    result = in_process("inspect", path, "--json")
    (row,) = inspect_rows(result.stdout)
    assert result.exit_code == 0 and row["onnxruntime_native"] is True


def test_lower_writes_a_model_whose_output_is_off_only_by_the_originals_spread(tmp_path):
    """sin(1e6 y) after a GridSample: its last-bit differences (openvino target) move Z by up to
    0.25, as they move the original's own Z; lower writes the model and says so."""
    source, out, report = tmp_path / "in.onnx", tmp_path / "out.onnx", tmp_path / "r.json"
    onnx.save(sensitive_to_rounding(), source)
    result = cli(
        "lower", source, "-o", out, "--target", "openvino", "--lower-all", "--report", report
    )
    assert result.returncode == 0 and out.exists(), result.stderr
    assert "output(s) 'Z' within the original's own spread" in result.stdout
    assert any(
        line.startswith("note: output 'Z':") and "within 2x how far" in line
        for line in result.stdout.splitlines()
    )
    (output,) = json.loads(report.read_text())["outputs"]
    assert output["mismatches"] and output["spread"] >= output["max_abs"] / 2
