"""Which compiler runs a program: XLA (`jit_compile=True`) or TensorFlow's graph executor.

The static signature is the contract either way: one program per `DatasetSpec` shape,
traced once at warm-up, a retrace an error. What changes is who runs the traced graph:
XLA fuses it into one compiled program (and the persistent compile cache keeps that
program), the graph executor runs TensorFlow's own kernels (oneDNN on a CPU) and has
nothing to compile or cache.

`train.compiler: auto` picks per device, task and role (train step, eval step, decoding
loop) from `AUTO`, a table of measurements (figures in the xtts-train README): on a CPU
the text-to-mel model's train and eval steps run on the graph executor and its decoding
under XLA, and the vocoder runs under XLA throughout. `xla` or `graph` overrides it for
every role.
"""

from __future__ import annotations

import tensorflow as tf

from xtts_train.config import COMPILERS

__all__ = ["AUTO", "COMPILERS", "ROLES", "TASK_AUTO", "choices", "device_kind", "resolve"]

ROLES = ("train", "eval", "decode")

# device kind -> role -> compiler, from `xtts-bench compiler` (xtts-train README,
# "Compiler per device"): on this project's 2-core x86 CPU (AVX-512), tiny model, batch
# 16 at the espeak recipe's three shapes, the graph executor ran the train step 3.2x and
# the eval step 4-5x faster than XLA on 1 and on 2 threads, while XLA ran the decoding
# loop (a `tf.while_loop` of many small ops) 1.3x (1 thread) to 3.5x (2 threads) faster.
# On accelerators XLA fuses what would otherwise be many small kernel launches.
_XLA = {"train": "xla", "eval": "xla", "decode": "xla"}
AUTO: dict[str, dict[str, str]] = {
    "CPU": {"train": "graph", "eval": "graph", "decode": "xla"},
    "GPU": _XLA,
    "TPU": _XLA,
}
# Tasks whose table differs from `AUTO`'s (the text-to-mel model's). The vocoder (small,
# batch 16 x 32 frames, 2 threads, `xtts-train check --task vocoder` and its eval and
# `Vocoding` timed alike): XLA 67 ms a train step against 84 on the graph executor, 18 ms
# an eval step against 25, 14 ms to vocode 2 s of audio against 20.
TASK_AUTO: dict[tuple[str, str], dict[str, str]] = {("CPU", "vocoder"): _XLA}


def device_kind() -> str:
    """`"TPU"`, `"GPU"` or `"CPU"`: the kind of device TensorFlow places steps on here."""
    for kind in ("TPU", "GPU"):
        if tf.config.list_logical_devices(kind):
            return kind
    return "CPU"


def resolve(compiler: str, role: str, device: str | None = None, *,
            task: str = "text_to_mel") -> str:  # fmt: skip
    """`"xla"` or `"graph"` for `role` of `task` on `device` (default: this process's
    `device_kind`).

    Raises:
        ValueError: an unknown compiler, role or device kind (config validation names the
            setting first; this guards direct callers).
    """
    if compiler not in COMPILERS:
        raise ValueError(f"Expected compiler one of {COMPILERS}, received: compiler={compiler!r}")
    if role not in ROLES:
        raise ValueError(f"Expected role one of {ROLES}, received: role={role!r}")
    if compiler != "auto":
        return compiler
    device = device or device_kind()
    if device not in AUTO:
        raise ValueError(f"Expected device one of {sorted(AUTO)}, received: device={device!r}")
    return TASK_AUTO.get((device, task), AUTO[device])[role]


def choices(compiler: str, task: str = "text_to_mel") -> dict[str, str]:
    """What `compiler` means here for `task`: `{"setting": compiler, "device": kind,
    "train": c, "eval": c, "decode": c}`, each `c` `"xla"` or `"graph"` (for `check` and
    summaries)."""
    device = device_kind()
    roles = {role: resolve(compiler, role, device, task=task) for role in ROLES}
    return {"setting": compiler, "device": device, **roles}
