"""`xtts-bench runtime`: its settings are checked before any process starts, its table
shows every run's figures, and a venv's size is what its site-packages hold."""

from __future__ import annotations

import pathlib

import pytest

from xtts_bench.cli import main
from xtts_bench.errors import SettingsError
from xtts_bench.runtime import format_runtime_table, run_runtime_benchmark, venv_size_mb


@pytest.mark.parametrize(
    ("settings", "words"),
    [({"runtimes": ("onnx", "torch")}, "torch"), ({"threads": (1, 0)}, "threads=0"),
     ({"repeats": 0}, "repeats=0"), ({"runtimes": ()}, "runtimes")],
)  # fmt: skip
def test_bad_settings_are_refused_before_anything_runs(tmp_path, settings, words):
    with pytest.raises(SettingsError, match=words):
        run_runtime_benchmark(tmp_path / "no-run", tmp_path / "no-vocoder", progress=False,
                              **settings)  # fmt: skip


def test_the_cli_names_a_bad_thread_list_in_one_line(tmp_path, capsys):
    assert main(["runtime", str(tmp_path), "--vocoder", str(tmp_path), "--threads", "1,x"]) == 2
    err = capsys.readouterr().err.strip()
    assert "--threads" in err
    assert len(err.splitlines()) == 1


def test_the_table_has_a_row_per_run_and_the_venv_sizes():
    text = {"text": "a", "audio_s": 2.0, "wall_s": 0.1, "rtf": 0.05, "first_audio_s": 0.04}
    result = {"texts": ["a"], "cores": 2, "venv_mb": {"tensorflow": 2787.0, "runtime": 265.5},
              "runs": [{"runtime": name, "threads": 1, "cold_start_s": 1.5, "peak_rss_mb": 150,
                        "texts": [text]} for name in ("onnx", "tf-xla")]}  # fmt: skip
    table = format_runtime_table(result).splitlines()
    assert table[1].split()[:5] == ["onnx", "1", "1.5", "0.050", "0.040"]
    assert table[2].startswith("tf-xla")
    assert table[-2:] == ["venv tensorflow: 2787 MB", "venv runtime: 266 MB"]


def test_a_venv_is_sized_by_its_site_packages(tmp_path):
    site = tmp_path / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    (site / "module.py").write_bytes(b"x" * 1_000_000)
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python").write_bytes(b"y" * 5_000_000)  # outside site-packages
    assert venv_size_mb(pathlib.Path(tmp_path)) == pytest.approx(1.0)
