"""xtts_train: the XTTS-style `TextToMel` model and the `Vocoder`, their configs and losses,
the tasks that train them through one compiled train step and its composed update, `fit`,
the free-running evaluation of a text-to-mel run and the copy synthesis of a vocoder run.

Layout, in layers that import only downward (`tests/test_layers.py`): `compile/` the
compiled programs' plumbing (compiler choice, compile cache, traces, warm-up, memory
estimates), `models/` the networks (`models.text_to_mel`: the model, its layers, losses
and decoding; `models.vocoder`), `runs/` what a run writes and how it is read back (with
the evals made while training), `training/` the machinery that trains them (the `Task`
protocol, compiled steps, the update, distribution, the loop), `inference/` vocoding and
long text, `evaluation/` the held-out scores, `tasks/` what is trained (text-to-mel,
vocoder; `fit` by `train.task`); the commands (`cli`, `check`, `synthesize`, `vocode`,
`export`, `demo`) sit at the top, the configs and errors at the bottom.

Names load on first use (`xtts_audio.startup.lazy_exports`): `import xtts_train` does not
import TensorFlow; `xtts_train.TextToMel` does.
"""

from typing import TYPE_CHECKING

from xtts_audio.startup import lazy_exports

if TYPE_CHECKING:
    from xtts_train.compile.compiler import device_kind
    from xtts_train.compile.process import measuring_pool
    from xtts_train.config import (
        PRESETS,
        DecodeConfig,
        ModelConfig,
        StackConfig,
        TextToMelConfig,
        TrainConfig,
        VocoderConfig,
        load_stack_config,
    )
    from xtts_train.demo import DEMO_SETTINGS
    from xtts_train.errors import ConfigError, MissingExtraError, XttsTrainError
    from xtts_train.evaluation.held_out import EvalReport, evaluate
    from xtts_train.evaluation.scores import dtw_distance, dtw_distances, pairing_scores
    from xtts_train.evaluation.words import (
        RECOGNISER_RATE,
        asr_available,
        make_recogniser,
        reference_words,
        transcribe,
        word_error_rate,
    )
    from xtts_train.inference.long_form import (
        MAX_PIECE_BATCH,
        PieceMels,
        piece_batch,
        speak_pieces,
        stream_pieces,
    )
    from xtts_train.inference.vocoding import VocoderStream, Vocoding, Waveforms, Window
    from xtts_train.models.text_to_mel.decoding import (
        TEXT_BUCKET,
        Decoding,
        Encoded,
        buffer_frames,
        check_buffer_frames,
        decoding_inputs,
        text_buffer_frames,
        text_pieces,
    )
    from xtts_train.models.text_to_mel.losses import masked_l1, stop_loss, total_loss
    from xtts_train.models.text_to_mel.model import TextToMel, dummy_batch
    from xtts_train.models.text_to_mel.postfilters import check_streamable, decode_frames
    from xtts_train.models.text_to_mel.slots import SlotDecoding, Slots, SlotStream
    from xtts_train.models.text_to_mel.streaming import CHUNK_FRAMES, Streaming
    from xtts_train.models.vocoder.losses import vocoder_losses
    from xtts_train.models.vocoder.model import Vocoder
    from xtts_train.runs.loading import kept_steps, load_reference, load_run, load_vocoder
    from xtts_train.tasks.registry import build_steps, fit, register_task, task_class
    from xtts_train.tasks.text_to_mel import TextToMelTask
    from xtts_train.tasks.vocoder import VocoderTask
    from xtts_train.training.optim import AdamW, warmup_cosine
    from xtts_train.training.step_functions import StepFunctions
    from xtts_train.training.steps import (
        CompiledSteps,
        RetraceError,
        kept_dtype_policy,
        timed_step,
    )
    from xtts_train.training.task import Task
    from xtts_train.training.transforms import (
        FiniteGate,
        LossScale,
        Update,
        accumulated_gradients,
        adamw,
        chain,
        clip_by_global_norm,
    )
    from xtts_train.vocode import VocodeReport, vocode

__all__ = [
    "CHUNK_FRAMES",
    "DEMO_SETTINGS",
    "MAX_PIECE_BATCH",
    "PRESETS",
    "RECOGNISER_RATE",
    "TEXT_BUCKET",
    "AdamW",
    "CompiledSteps",
    "ConfigError",
    "DecodeConfig",
    "Decoding",
    "Encoded",
    "EvalReport",
    "FiniteGate",
    "LossScale",
    "MissingExtraError",
    "ModelConfig",
    "PieceMels",
    "RetraceError",
    "SlotDecoding",
    "SlotStream",
    "Slots",
    "StackConfig",
    "StepFunctions",
    "Streaming",
    "Task",
    "TextToMel",
    "TextToMelConfig",
    "TextToMelTask",
    "TrainConfig",
    "Update",
    "VocodeReport",
    "Vocoder",
    "VocoderConfig",
    "VocoderStream",
    "VocoderTask",
    "Vocoding",
    "Waveforms",
    "Window",
    "XttsTrainError",
    "accumulated_gradients",
    "adamw",
    "asr_available",
    "buffer_frames",
    "build_steps",
    "chain",
    "check_buffer_frames",
    "check_streamable",
    "clip_by_global_norm",
    "decode_frames",
    "decoding_inputs",
    "device_kind",
    "dtw_distance",
    "dtw_distances",
    "dummy_batch",
    "evaluate",
    "fit",
    "kept_dtype_policy",
    "kept_steps",
    "load_reference",
    "load_run",
    "load_stack_config",
    "load_vocoder",
    "make_recogniser",
    "masked_l1",
    "measuring_pool",
    "pairing_scores",
    "piece_batch",
    "reference_words",
    "register_task",
    "speak_pieces",
    "stop_loss",
    "stream_pieces",
    "task_class",
    "text_buffer_frames",
    "text_pieces",
    "timed_step",
    "total_loss",
    "transcribe",
    "vocode",
    "vocoder_losses",
    "warmup_cosine",
    "word_error_rate",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        **dict.fromkeys(
            [
                "PRESETS",
                "DecodeConfig",
                "ModelConfig",
                "StackConfig",
                "TextToMelConfig",
                "TrainConfig",
                "VocoderConfig",
                "load_stack_config",
            ],
            "config",
        ),
        **dict.fromkeys(
            [
                "TEXT_BUCKET",
                "Decoding",
                "Encoded",
                "buffer_frames",
                "check_buffer_frames",
                "decoding_inputs",
                "text_buffer_frames",
                "text_pieces",
            ],
            "models.text_to_mel.decoding",
        ),
        **dict.fromkeys(
            ["MAX_PIECE_BATCH", "PieceMels", "piece_batch", "speak_pieces", "stream_pieces"],
            "inference.long_form",
        ),
        **dict.fromkeys(["check_streamable", "decode_frames"], "models.text_to_mel.postfilters"),
        **dict.fromkeys(["CHUNK_FRAMES", "Streaming"], "models.text_to_mel.streaming"),
        **dict.fromkeys(["SlotDecoding", "SlotStream", "Slots"], "models.text_to_mel.slots"),
        "DEMO_SETTINGS": "demo",
        **dict.fromkeys(["ConfigError", "MissingExtraError", "XttsTrainError"], "errors"),
        **dict.fromkeys(
            [
                "RECOGNISER_RATE",
                "asr_available",
                "make_recogniser",
                "reference_words",
                "transcribe",
                "word_error_rate",
            ],
            "evaluation.words",
        ),
        **dict.fromkeys(["dtw_distance", "dtw_distances", "pairing_scores"], "evaluation.scores"),
        **dict.fromkeys(["EvalReport", "evaluate"], "evaluation.held_out"),
        **dict.fromkeys(
            ["kept_steps", "load_reference", "load_run", "load_vocoder"], "runs.loading"
        ),
        **dict.fromkeys(["masked_l1", "stop_loss", "total_loss"], "models.text_to_mel.losses"),
        **dict.fromkeys(["TextToMel", "dummy_batch"], "models.text_to_mel.model"),
        "Vocoder": "models.vocoder.model",
        "vocoder_losses": "models.vocoder.losses",
        "Task": "training.task",
        "TextToMelTask": "tasks.text_to_mel",
        "VocoderTask": "tasks.vocoder",
        **dict.fromkeys(["build_steps", "fit", "register_task", "task_class"], "tasks.registry"),
        **dict.fromkeys(["VocodeReport", "vocode"], "vocode"),
        **dict.fromkeys(["VocoderStream", "Vocoding", "Waveforms", "Window"], "inference.vocoding"),
        **dict.fromkeys(["AdamW", "warmup_cosine"], "training.optim"),
        "StepFunctions": "training.step_functions",
        "measuring_pool": "compile.process",
        "device_kind": "compile.compiler",
        **dict.fromkeys(
            ["CompiledSteps", "RetraceError", "kept_dtype_policy", "timed_step"],
            "training.steps",
        ),
        **dict.fromkeys(
            [
                "FiniteGate",
                "LossScale",
                "Update",
                "accumulated_gradients",
                "adamw",
                "chain",
                "clip_by_global_norm",
            ],
            "training.transforms",
        ),
    },
)
