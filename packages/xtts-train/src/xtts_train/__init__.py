"""xtts_train: the XTTS-style `TextToMel` model, its config and its masked losses."""

from xtts_train.errors import ConfigError, XttsTrainError
from xtts_train.losses import masked_l1, stop_loss, total_loss
from xtts_train.model import PRESETS, ModelConfig, TextToMel, dummy_batch

__all__ = [
    "PRESETS",
    "ConfigError",
    "ModelConfig",
    "TextToMel",
    "XttsTrainError",
    "dummy_batch",
    "masked_l1",
    "stop_loss",
    "total_loss",
]
