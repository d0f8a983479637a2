"""tests/support/second_reading: a second measurement only when the first is off, each in its own directory."""

from __future__ import annotations

from tests.support.second_reading import measured_twice


def test_a_reading_that_is_not_off_is_measured_once(tmp_path):
    dirs = []
    reading, work = measured_twice(tmp_path, lambda d: dirs.append(d) or len(dirs), lambda r: None)
    assert (reading, work, dirs) == (1, tmp_path / "run1", [tmp_path / "run1"])


def test_an_off_reading_is_measured_again_in_a_new_directory_and_the_second_is_judged(tmp_path, capsys):
    dirs = []
    reading, work = measured_twice(tmp_path, lambda d: dirs.append(d) or len(dirs), lambda r: "noisy")
    assert (reading, work, dirs) == (2, tmp_path / "run2", [tmp_path / "run1", tmp_path / "run2"])
    assert all(d.is_dir() for d in dirs) and "(noisy): once more" in capsys.readouterr().out
