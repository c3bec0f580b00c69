"""The public surface of xtts_train is a contract: exact `__all__`, `__init__` only
re-exports, every name documented, errors typed."""

from __future__ import annotations

import inspect

import pytest
from surface_helpers import check_public_surface

import xtts_train

EXPECTED = {
    "DEMO_SETTINGS", "PRESETS", "AdamW", "CompiledSteps", "ConfigError", "DecodeConfig", "Decoding",
    "EvalReport", "FiniteGate", "LossScale", "ModelConfig", "RetraceError", "StackConfig",
    "StepFunctions", "Streaming", "TextToMel", "TrainConfig", "Update", "XttsTrainError",
    "accumulated_gradients", "adamw", "build_steps", "chain", "clip_by_global_norm",
    "decode_frames", "dtw_distance", "dtw_distances", "dummy_batch", "evaluate", "fit", "kept_dtype_policy", "kept_steps",
    "load_reference", "load_run", "load_stack_config", "masked_l1", "measuring_pool", "pairing_scores",
    "stop_loss", "timed_step", "total_loss", "warmup_cosine",
    # the vocoder and the tasks
    "Task", "TextToMelConfig", "TextToMelTask", "VocoderTask", "register_task", "task_class", "Vocoder", "VocoderConfig", "vocoder_losses",
    "VocodeReport", "Vocoding", "load_vocoder", "vocode",
    # what a caller that speaks needs (xtts-serve): text to pieces, pieces to audio
    "CHUNK_FRAMES", "MAX_PIECE_BATCH", "TEXT_BUCKET", "Encoded", "Waveforms",
    "check_buffer_frames", "piece_batch", "speak_pieces", "stream_pieces", "text_buffer_frames",
    "text_pieces",
    # the decoding program's inputs and buffer, for an exporter of it (xtts-bench hlo)
    "buffer_frames", "decoding_inputs",
    # decoder slots: texts decoded side by side, each joining and leaving at any step
    "PieceMels", "SlotDecoding", "SlotStream", "Slots", "VocoderStream", "Window", "device_kind",
    "check_streamable",
    # words: an offline recogniser's word error rate (the asr extra)
    "MissingExtraError", "RECOGNISER_RATE", "asr_available", "make_recogniser",
    "reference_words", "transcribe", "word_error_rate",
}  # fmt: skip


def test_all_is_exactly_the_contract():
    assert set(xtts_train.__all__) == EXPECTED


def test_init_only_reexports_and_nothing_public_is_missing():
    check_public_surface("xtts_train")


# Values, which carry no docstring of their own (their modules document them).
CONSTANTS = {"PRESETS", "DEMO_SETTINGS", "CHUNK_FRAMES", "MAX_PIECE_BATCH", "TEXT_BUCKET"}


@pytest.mark.parametrize("name", sorted(EXPECTED - CONSTANTS))
def test_every_public_name_has_a_docstring(name):
    assert inspect.getdoc(getattr(xtts_train, name))


def test_errors_subclass_the_package_error_and_the_builtin_they_mean():
    assert issubclass(xtts_train.ConfigError, xtts_train.XttsTrainError)
    assert issubclass(xtts_train.ConfigError, ValueError)
