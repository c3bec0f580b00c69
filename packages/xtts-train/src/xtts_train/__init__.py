"""xtts_train: the XTTS-style `TextToMel` model, its config and its masked losses.

Names load on first use (`xtts_audio.startup.lazy_exports`): `import xtts_train` does not
import TensorFlow; `xtts_train.TextToMel` does.
"""

from typing import TYPE_CHECKING

from xtts_audio.startup import lazy_exports

if TYPE_CHECKING:
    from xtts_train.config import PRESETS, ModelConfig
    from xtts_train.errors import ConfigError, XttsTrainError
    from xtts_train.losses import masked_l1, stop_loss, total_loss
    from xtts_train.model import TextToMel, dummy_batch

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

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        **dict.fromkeys(["ConfigError", "XttsTrainError"], "errors"),
        **dict.fromkeys(["masked_l1", "stop_loss", "total_loss"], "losses"),
        **dict.fromkeys(["PRESETS", "ModelConfig"], "config"),
        **dict.fromkeys(["TextToMel", "dummy_batch"], "model"),
    },
)
