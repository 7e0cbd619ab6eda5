"""The shared folder listing (`storage.entries`, `storage.visible`) and the shared minimum check
(`validation.check_at_least`): one implementation each, used by every job's listings and configs."""

from __future__ import annotations

import pyarrow.fs as pafs
import pytest

from sentray.kit import storage
from sentray.kit.validation import check_at_least


def test_entries_of_a_missing_folder_are_none_and_visible_skips_what_pyarrow_skips(tmp_path):
    assert storage.entries(storage.locate(str(tmp_path / "absent"))) == []
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "part.parquet").write_bytes(b"x")
    (tmp_path / "_runs").mkdir()
    (tmp_path / ".tmp-1").write_bytes(b"x")
    (tmp_path / "_SUCCESS").write_bytes(b"")
    (tmp_path / "b.parquet").write_bytes(b"x")
    folder = storage.locate(str(tmp_path))
    top = storage.entries(folder)
    assert len(top) == 5  # entries lists everything; visible chooses
    assert [name for name, _ in storage.visible(top, pafs.FileType.File)] == ["b.parquet"]
    assert [name for name, _ in storage.visible(top, pafs.FileType.Directory)] == ["a"]
    below = storage.entries(folder, recursive=True)
    assert sorted(name for name, _ in storage.visible(below, pafs.FileType.File)) == [
        "b.parquet", "part.parquet"]
    # list_files, built on them, agrees
    assert [posix.rsplit("/", 1)[-1] for posix in
            (info.path for info in storage.list_files(folder, (".parquet",)))] == [
        "part.parquet", "b.parquet"]


def test_check_at_least_names_the_first_value_below_its_minimum_and_lets_none_pass():
    check_at_least(1, batch_size=1, max_steps=None)
    with pytest.raises(ValueError, match=r"^max_steps must be >= 1, got 0$"):
        check_at_least(1, batch_size=4, max_steps=0, epochs=-1)
    with pytest.raises(ValueError, match=r"^threads must be >= 0, got -1$"):
        check_at_least(0, threads=-1)
