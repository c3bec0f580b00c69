"""The compiled programs of a run as HLO protos, and a runner of them that needs only jax.

`export_hlo(ExportConfig(...))` writes each bucket's train step (`xtts-bench hlo export`);
`runner.py` (standalone: NumPy and jax) compiles and times them on any device jaxlib has,
or runs one step on given parameters for a check against TensorFlow.

Names load on first use (`xtts_audio.startup.lazy_exports`): the CLI's parser imports
`xtts_bench.hlo.command` without TensorFlow.
"""

from typing import TYPE_CHECKING

from xtts_audio.startup import lazy_exports

if TYPE_CHECKING:
    from xtts_bench.hlo.export import (
        ExportConfig,
        Program,
        build_programs,
        export_hlo,
        format_export,
        hlo_header,
        ljspeech_spec,
        load_parameters,
        parameter_values,
        write_programs,
    )
    from xtts_bench.hlo.parameters import ROLES

__all__ = [
    "ROLES",
    "ExportConfig",
    "Program",
    "build_programs",
    "export_hlo",
    "format_export",
    "hlo_header",
    "ljspeech_spec",
    "load_parameters",
    "parameter_values",
    "write_programs",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        **dict.fromkeys(["ExportConfig", "Program", "build_programs", "export_hlo",
                         "format_export", "hlo_header", "ljspeech_spec", "load_parameters",
                         "parameter_values", "write_programs"],
                        "export"),
        "ROLES": "parameters",
    },
)  # fmt: skip
