"""xtts_train: the XTTS-style `TextToMel` model, its configs and losses, the compiled train
step and its composed update, `fit`, and the free-running evaluation of a run.

Names load on first use (`xtts_audio.startup.lazy_exports`): `import xtts_train` does not
import TensorFlow; `xtts_train.TextToMel` does.
"""

from typing import TYPE_CHECKING

from xtts_audio.startup import lazy_exports

if TYPE_CHECKING:
    from xtts_train.config import (
        PRESETS,
        ModelConfig,
        StackConfig,
        TrainConfig,
        load_stack_config,
    )
    from xtts_train.decoding import Decoding
    from xtts_train.demo import DEMO_SETTINGS
    from xtts_train.errors import ConfigError, XttsTrainError
    from xtts_train.evaluation import dtw_distance, pairing_scores
    from xtts_train.held_out import EvalReport, evaluate
    from xtts_train.losses import masked_l1, stop_loss, total_loss
    from xtts_train.model import TextToMel, dummy_batch
    from xtts_train.optim import AdamW, warmup_cosine
    from xtts_train.step_functions import StepFunctions
    from xtts_train.steps import (
        CompiledSteps,
        RetraceError,
        kept_dtype_policy,
        shape_of,
        timed_step,
    )
    from xtts_train.synthesize import load_reference, load_run
    from xtts_train.trainer import build_steps, fit
    from xtts_train.transforms import (
        FiniteGate,
        LossScale,
        Update,
        accumulated_gradients,
        adamw,
        chain,
        clip_by_global_norm,
    )

__all__ = [
    "DEMO_SETTINGS",
    "PRESETS",
    "AdamW",
    "CompiledSteps",
    "ConfigError",
    "Decoding",
    "EvalReport",
    "FiniteGate",
    "LossScale",
    "ModelConfig",
    "RetraceError",
    "StackConfig",
    "StepFunctions",
    "TextToMel",
    "TrainConfig",
    "Update",
    "XttsTrainError",
    "accumulated_gradients",
    "adamw",
    "build_steps",
    "chain",
    "clip_by_global_norm",
    "dtw_distance",
    "dummy_batch",
    "evaluate",
    "fit",
    "kept_dtype_policy",
    "load_reference",
    "load_run",
    "load_stack_config",
    "masked_l1",
    "pairing_scores",
    "shape_of",
    "stop_loss",
    "timed_step",
    "total_loss",
    "warmup_cosine",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        **dict.fromkeys(
            ["PRESETS", "ModelConfig", "StackConfig", "TrainConfig", "load_stack_config"], "config"
        ),
        "Decoding": "decoding",
        "DEMO_SETTINGS": "demo",
        **dict.fromkeys(["ConfigError", "XttsTrainError"], "errors"),
        **dict.fromkeys(["dtw_distance", "pairing_scores"], "evaluation"),
        **dict.fromkeys(["EvalReport", "evaluate"], "held_out"),
        **dict.fromkeys(["masked_l1", "stop_loss", "total_loss"], "losses"),
        **dict.fromkeys(["TextToMel", "dummy_batch"], "model"),
        **dict.fromkeys(["AdamW", "warmup_cosine"], "optim"),
        "StepFunctions": "step_functions",
        **dict.fromkeys(
            ["CompiledSteps", "RetraceError", "kept_dtype_policy", "shape_of", "timed_step"],
            "steps",
        ),
        **dict.fromkeys(["load_reference", "load_run"], "synthesize"),
        **dict.fromkeys(["build_steps", "fit"], "trainer"),
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
            "transforms",
        ),
    },
)
