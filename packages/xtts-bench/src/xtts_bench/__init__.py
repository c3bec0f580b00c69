"""xtts_bench: side-by-side measurements of the xtts packages against the pipelines they replace.

Each `xtts-bench` command has a runner here, most with a settings dataclass checked once:
`run_data_benchmarks(DataBenchConfig(...))` returns the figures `xtts-bench compare --json`
prints, `run_gate(GateConfig(...))` the gate's exit code and verdict. The pipelines and the
train step measured against are the module `xtts_bench.baselines`; the tables the CLI prints
are in each benchmark's module.

Names load on first use (`xtts_audio.startup.lazy_exports`): `import xtts_bench` does not
import TensorFlow, librosa or asv.
"""

from typing import TYPE_CHECKING

from xtts_audio.startup import lazy_exports

if TYPE_CHECKING:
    from xtts_bench.audio import run_audio_benchmarks
    from xtts_bench.compilers import run_compiler_benchmark
    from xtts_bench.data import run_data_benchmarks
    from xtts_bench.decode import run_decode_benchmark
    from xtts_bench.errors import MissingExtraError, SettingsError, XttsBenchError
    from xtts_bench.gate import run_gate
    from xtts_bench.intelligibility import run_wer_benchmark
    from xtts_bench.learning import run_learning_benchmark
    from xtts_bench.peers import run_peers_benchmark
    from xtts_bench.profile import run_profile_benchmark
    from xtts_bench.settings import (
        AudioBenchConfig,
        CompilerBenchConfig,
        DataBenchConfig,
        GateConfig,
        LearningBenchConfig,
        PeersBenchConfig,
        ProfileBenchConfig,
        StartupBenchConfig,
        TrainBenchConfig,
    )
    from xtts_bench.startup import run_startup_benchmarks
    from xtts_bench.train import run_train_benchmarks

__all__ = [
    "AudioBenchConfig",
    "CompilerBenchConfig",
    "DataBenchConfig",
    "GateConfig",
    "LearningBenchConfig",
    "MissingExtraError",
    "PeersBenchConfig",
    "ProfileBenchConfig",
    "SettingsError",
    "StartupBenchConfig",
    "TrainBenchConfig",
    "XttsBenchError",
    "run_audio_benchmarks",
    "run_compiler_benchmark",
    "run_data_benchmarks",
    "run_decode_benchmark",
    "run_gate",
    "run_learning_benchmark",
    "run_peers_benchmark",
    "run_profile_benchmark",
    "run_startup_benchmarks",
    "run_train_benchmarks",
    "run_wer_benchmark",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "run_audio_benchmarks": "audio",
        "run_compiler_benchmark": "compilers",
        "run_data_benchmarks": "data",
        "run_decode_benchmark": "decode",
        **dict.fromkeys(["MissingExtraError", "SettingsError", "XttsBenchError"], "errors"),
        "run_gate": "gate",
        "run_wer_benchmark": "intelligibility",
        "run_learning_benchmark": "learning",
        "run_peers_benchmark": "peers",
        "run_profile_benchmark": "profile",
        **dict.fromkeys(["AudioBenchConfig", "CompilerBenchConfig", "DataBenchConfig",
                         "GateConfig",
                         "LearningBenchConfig", "PeersBenchConfig", "ProfileBenchConfig",
                         "StartupBenchConfig",
                         "TrainBenchConfig"],
                        "settings"),
        "run_startup_benchmarks": "startup",
        "run_train_benchmarks": "train",
    },
)  # fmt: skip
