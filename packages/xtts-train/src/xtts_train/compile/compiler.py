"""Which compiler runs a program: XLA (`jit_compile=True`) or TensorFlow's graph executor.

The static signature is the contract either way: one program per `DatasetSpec` shape,
traced once at warm-up, a retrace an error. What changes is who runs the traced graph:
XLA fuses it into one compiled program (and the persistent compile cache keeps that
program), the graph executor runs TensorFlow's own kernels (oneDNN on a CPU) and has
nothing to compile or cache.

`train.compiler: auto` picks per device and role (train step, eval step, decoding loop)
from `AUTO`, a table of measurements (figures in docs/train/compilers.md): on a CPU the
text-to-mel model's train and eval steps run on the graph executor and its decoding under
XLA. A network whose measurements differ brings its own table (`table=`: the vocoder's
`AUTO_COMPILERS`, XLA throughout), which its task declares (`Task.compilers`). `xla` or
`graph` overrides it for every role.
"""

from __future__ import annotations

from collections.abc import Mapping

import tensorflow as tf

from xtts_train.config import COMPILERS

__all__ = ["AUTO", "COMPILERS", "ROLES", "XLA", "choices", "device_kind", "resolve"]

ROLES = ("train", "eval", "decode")

# device kind -> role -> compiler, from `xtts-bench compiler` (docs/train/compilers.md):
# on this project's 2-core x86 CPU (AVX-512), tiny model, batch 16 at the espeak recipe's
# three shapes, the graph executor ran the train step 3.2x and the eval step 4-5x faster
# than XLA on 1 and on 2 threads, while XLA ran the decoding loop (a `tf.while_loop` of
# many small ops) 1.3x (1 thread) to 3.5x (2 threads) faster.
# On accelerators XLA fuses what would otherwise be many small kernel launches.
XLA = {"train": "xla", "eval": "xla", "decode": "xla"}
AUTO: dict[str, dict[str, str]] = {
    "CPU": {"train": "graph", "eval": "graph", "decode": "xla"},
    "GPU": XLA,
    "TPU": XLA,
}
Table = Mapping[str, Mapping[str, str]]  # device kind -> role -> compiler


def device_kind() -> str:
    """`"TPU"`, `"GPU"` or `"CPU"`: the kind of device TensorFlow places steps on here."""
    for kind in ("TPU", "GPU"):
        if tf.config.list_logical_devices(kind):
            return kind
    return "CPU"


def resolve(compiler: str, role: str, device: str | None = None, *,
            table: Table | None = None) -> str:  # fmt: skip
    """`"xla"` or `"graph"` for `role` on `device` (default: this process's `device_kind`),
    by `table` where it names the device (a network's own measurements), else `AUTO`.

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
    return (table or {}).get(device, AUTO[device])[role]


def choices(compiler: str, table: Table | None = None) -> dict[str, str]:
    """What `compiler` means here (with a network's `table`): `{"setting": compiler,
    "device": kind, "train": c, "eval": c, "decode": c}`, each `c` `"xla"` or `"graph"`
    (for `check` and summaries)."""
    device = device_kind()
    roles = {role: resolve(compiler, role, device, table=table) for role in ROLES}
    return {"setting": compiler, "device": device, **roles}
