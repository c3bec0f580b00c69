"""The public surface of xtts_data is a contract: exact `__all__`, `__init__` only
re-exports, every name documented, errors typed."""

from __future__ import annotations

import inspect

import pytest
from surface_helpers import check_public_surface

import xtts_data

EXPECTED = {
    "DEMO_SENTENCES", "BadAudioError", "BatchShape", "CacheError", "ConfigError", "Corpus",
    "CorpusError", "EmptySplitError", "DataConfig", "DataPipeline", "DatasetSpec", "DemoCorpus", "DoctorReport",
    "FeatureCache", "LockError", "OutputExistsError", "Piece", "PrepareResult", "Row", "SegmentPipeline", "SegmentShape",
    "SegmentSpec", "Skipped", "TextConfig", "Tokenizer", "Transcripts", "Utterance",
    "XttsDataError", "diagnose", "format_summary", "is_validation", "load_audio",
    "load_config", "make_dataset", "make_segment_dataset", "normalize_text", "normalize_texts",
    "plan_shapes", "prepare", "python_ops", "read_corpus", "read_transcripts", "derive_mels",
    "read_utterances", "speak_demo", "split_text", "start_dispatcher", "start_worker", "text_to_ids",
    "verify_cache", "write_demo_corpus",
}  # fmt: skip


def test_all_is_exactly_the_contract():
    assert set(xtts_data.__all__) == EXPECTED


def test_init_only_reexports_and_nothing_public_is_missing():
    check_public_surface("xtts_data")


@pytest.mark.parametrize("name", sorted(EXPECTED - {"DEMO_SENTENCES"}))
def test_every_public_name_has_a_docstring(name):
    assert inspect.getdoc(getattr(xtts_data, name))


@pytest.mark.parametrize(
    ("error", "builtin"),
    [("ConfigError", ValueError), ("CorpusError", ValueError), ("BadAudioError", ValueError),
     ("CacheError", RuntimeError), ("LockError", RuntimeError), ("EmptySplitError", ValueError),
     ("OutputExistsError", FileExistsError)],
)  # fmt: skip
def test_errors_subclass_the_package_error_and_the_builtin_they_mean(error, builtin):
    assert issubclass(getattr(xtts_data, error), xtts_data.XttsDataError)
    assert issubclass(getattr(xtts_data, error), builtin)
