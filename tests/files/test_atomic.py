"""Durable, ordered writes: each staged file reaches the disk before its rename, data first.

Power loss or a crash between steps must leave either the old files or the new ones: a model
renamed in before its data (or before either is synced) could point at data that is not there.
"""

from __future__ import annotations

import os
import pathlib

from conftest import weighted_model

from gridsample_lower.files import model_io


def test_each_file_is_synced_before_its_rename_and_the_data_before_the_model(tmp_path, monkeypatch):
    events: list[tuple[str, str]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        return real_fsync(fd)

    def replace(src, dst):
        events.append(("replace", str(src), str(dst)))
        return real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    target = tmp_path / "out.onnx"
    model_io.save_model(weighted_model(0), target, external_data="out.bin")
    finals = {str(tmp_path / "out.bin"), str(target)}  # the renames over the targets
    renames = [e for e in events if e[0] == "replace" and e[2] in finals]
    assert [pathlib.Path(e[2]).name for e in renames] == ["out.bin", "out.onnx"]  # data first
    for rename in renames:
        assert events.index(("fsync", rename[1])) < events.index(rename)  # synced, then renamed
    last_rename = max(events.index(e) for e in renames)
    directory_synced = [
        k for k, e in enumerate(events) if e[0] == "fsync" and e[1] == str(tmp_path)
    ]
    assert directory_synced and directory_synced[-1] > last_rename  # the renames, made durable
