"""The compiled programs of a run as HLO protos, and a runner of them that needs only jax.

`export_hlo(ExportConfig(...))` writes each bucket's train and eval step and a text-to-mel
run's decoding (`xtts-bench hlo export`); `predict_busy` predicts how busy a device stays
from the runner's step times and the input pipeline's cost (`xtts-bench hlo predict`);
`runner.py` (standalone: NumPy and jax) compiles and times them on any device jaxlib has,
or runs one step on given parameters for a check against TensorFlow.

Names load on first use (`xtts_audio.startup.lazy_exports`): the CLI's parser imports
`xtts_bench.hlo.command` without TensorFlow.
"""

from typing import TYPE_CHECKING

from xtts_audio.startup import lazy_exports

if TYPE_CHECKING:
    from xtts_bench.hlo.export import (
        export_hlo,
        format_export,
        hlo_header,
        load_parameters,
        parameter_values,
        write_programs,
    )
    from xtts_bench.hlo.parameters import ROLES
    from xtts_bench.hlo.predict import format_prediction, predict_busy
    from xtts_bench.hlo.programs import (
        KINDS,
        STOP_BIAS,
        ExportConfig,
        Program,
        batch_shares,
        build_programs,
        ljspeech_spec,
    )

__all__ = [
    "KINDS",
    "ROLES",
    "STOP_BIAS",
    "ExportConfig",
    "Program",
    "batch_shares",
    "build_programs",
    "export_hlo",
    "format_export",
    "format_prediction",
    "hlo_header",
    "ljspeech_spec",
    "load_parameters",
    "parameter_values",
    "predict_busy",
    "write_programs",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        **dict.fromkeys(["export_hlo", "format_export", "hlo_header", "load_parameters",
                         "parameter_values", "write_programs"], "export"),
        **dict.fromkeys(["KINDS", "STOP_BIAS", "ExportConfig", "Program", "batch_shares",
                         "build_programs", "ljspeech_spec"], "programs"),
        **dict.fromkeys(["format_prediction", "predict_busy"], "predict"),
        "ROLES": "parameters",
    },
)  # fmt: skip
