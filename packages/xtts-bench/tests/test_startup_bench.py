"""`xtts-bench startup`: the projection, the table and the settings (the runs themselves
take minutes of compiling: measured by hand, figures in docs/train/start-up.md)."""

from __future__ import annotations

import pytest

from xtts_bench import startup
from xtts_bench.cli import main
from xtts_bench.errors import SettingsError
from xtts_bench.settings import StartupBenchConfig
from xtts_bench.startup import format_startup_table, project_cold

RUN = {
    "time_to_first_step_s": 40.0,
    "startup_s": {
        "import": 3.0,
        "data": 1.0,
        "model": 0.5,
        "trace": 6.0,
        "compile": 29.0,
        "first_step": 0.5,
    },
    "programs": {
        "train 2x4x8": {"trace_s": 3.0, "compile_s": 20.0},
        "train 2x6x12": {"trace_s": 3.0, "compile_s": 12.0},
    },
    "compiled": 2,
    "cache_hits": 0,
    "stored": 0,
    "workers": 1,
    "peak_rss_mb": 2000.0,
}


@pytest.mark.parametrize(("cores", "expected"), [
    (1, 5.0 + 3 + 20 + 12),  # one compile thread: the second compile waits for the first
    (2, 5.0 + 3 + 20 + 12),  # two cores: one traces, one compiles
    (3, 5.0 + 3 + 20),  # the second compile (ready at 6 s) ends at 18 s, before the first
])  # fmt: skip
def test_projection_schedules_compiles_after_their_traces(cores, expected):
    assert project_cold(RUN, cores) == pytest.approx(expected)


def test_table_names_every_run_and_the_warm_ratio():
    warm = {**RUN, "time_to_first_step_s": 10.0, "compiled": 0, "cache_hits": 2, "stored": 2}
    results = {"cores": 2, "compiler": "xla", "workloads": {"demo": {
        "runs": {"cold, 1 compile thread": RUN, "cold, concurrent": RUN,
                 "warm (second process)": warm},
        "warm_vs_cold": 0.25, "projected_cold_s": {1: 40.0, 4: 28.0},
    }}}  # fmt: skip
    table = format_startup_table(results)
    for text in (
        "cold, 1 compile thread",
        "warm (second process)",
        "25%",
        "4 cores 28 s",
        "train.compiler=xla",
    ):
        assert text in table
    warm_row = next(line for line in table.splitlines() if line.startswith("warm"))
    assert warm_row.split()[-2] == "2"  # stored traces column


@pytest.mark.parametrize(("fields", "message"), [
    ({"workloads": ("demo", "huge")}, "workloads"),
    ({"workloads": ()}, "workloads"),
    ({"utterances": 0}, "utterances"),
    ({"corpus": "/nonexistent/corpus"}, "corpus"),
    ({"compiler": "jit"}, "StartupBenchConfig.compiler: expected one of"),
])  # fmt: skip
def test_settings_are_checked(fields, message):
    with pytest.raises(ValueError, match=message):
        StartupBenchConfig(**fields)


@pytest.mark.parametrize(("fields", "message"), [
    ({"workloads": ("demo",), "utterances": 50},
     r"StartupBenchConfig.utterances: expected the 'default' workload .*utterances=50"),
    ({"workloads": ("demo",), "corpus": "CORPUS"},
     r"StartupBenchConfig.corpus: expected the 'default' workload .*corpus='.*'"),
    ({"corpus": "CORPUS", "utterances": 50},
     r"StartupBenchConfig.utterances: expected it only without a corpus .*utterances=50"),
])  # fmt: skip
def test_a_corpus_or_utterances_no_workload_reads_are_refused(tmp_path, fields, message):
    fields = {**fields, **({"corpus": tmp_path} if "corpus" in fields else {})}
    with pytest.raises(SettingsError, match=message):
        StartupBenchConfig(**fields)


class WrittenError(Exception):
    """Raised by a stand-in `write_demo_corpus`: the corpus a workload asked for, before its cache and its fits (minutes) run."""


def test_utterances_size_the_default_workloads_corpus(tmp_path, monkeypatch):
    def write(corpus, *, n, **kw):
        raise WrittenError(corpus.parent.name, n)

    monkeypatch.setattr("xtts_data.write_demo_corpus", write)
    for utterances, expected in ((None, 300), (40, 40)):
        bench = StartupBenchConfig(workloads=("default",), utterances=utterances)
        assert bench.synthetic_utterances == expected
        with pytest.raises(WrittenError) as written:
            startup._workload(bench, "default", tmp_path / "default")
        assert written.value.args == ("default", expected)


def test_the_cli_refuses_utterances_beside_a_corpus_in_one_line(tmp_path, capsys):
    assert main(["startup", "--corpus", str(tmp_path), "--utterances", "50"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("xtts-bench startup: error: StartupBenchConfig.utterances: ")
    assert err.count("\n") == 1, err
