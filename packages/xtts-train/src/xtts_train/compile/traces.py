"""Stored traces: a step traced once per machine and code, registered again instead of traced.

Tracing a train step is Python (TensorFlow's op-building code, ~0.4 ms an op, ~8,000 ops),
and it was most of a warm start: the compile cache (`compile_cache`) gives back XLA's
executables, not the traced graphs. A traced program is a library of `FunctionDef`s; `save`
writes it with the variables its captured inputs are, and `load` registers the library
with TensorFlow's runtime in a later process and returns a `StoredProgram`, called like the
traced concrete function, with no Python tracing.

A stored trace is found by its key (`key`): everything that decides the traced graph, known
before tracing: the program's name and input signature, the code (a digest of xtts-train's
and xtts-audio's sources, TensorFlow's and Keras's versions), the config the step reads,
the dtype policy, and the variables (shapes and dtypes, in order). A change to any of them is
another key: that program is traced and stored again.

The traces live beside the compile cache's executables (`<cache>/<machine>/traces/`), on
when it is: `--no-compile-cache` and `XTTS_COMPILE_CACHE=off` trace every program. Each
file carries the SHA-256 of its library; a damaged one is deleted, logged and traced again.

The traces are made under `compile_cache.stable_names`, which also leaves out each op's
Python stack trace: XLA writes an op's source line into the program it compiles, and a
registered library has none, so a traced and a registered program would be two different
programs to the compile cache.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import keras
import tensorflow as tf
from tensorflow.core.framework import function_pb2
from tensorflow.python.eager import context  # private: no public call of a FunctionDef by name

import xtts_audio
from xtts_data.files import write_bytes_atomic

__all__ = ["StoredProgram", "fingerprint", "folder_of", "key", "load", "save", "source_digest"]

logger = logging.getLogger(__name__)

FORMAT = 1  # the layout of a stored trace; part of every key
_FOLDER = "traces"


@dataclasses.dataclass(frozen=True, eq=False)
class StoredProgram:
    """A step registered from its stored library, called as the traced concrete function:
    `program(*inputs)` -> its dict of output tensors.

    Attributes:
        name: the top function's name (as traced, under `stable_names`).
        inputs: the number of flat tensor inputs (`tf.nest.flatten(inputs)`).
        captures: the variables' resource handles, in the order the function takes them
            after its inputs.
        outputs: the keys of the output dict, in the function's order (sorted).
        fingerprint: `fingerprint` of the traced program it was stored from.
    """

    name: str
    inputs: int
    captures: tuple[tf.Tensor, ...]
    outputs: tuple[str, ...]
    fingerprint: str

    def __call__(self, *inputs: Any) -> dict[str, tf.Tensor]:
        flat = [tf.convert_to_tensor(x) for x in tf.nest.flatten(inputs)]
        if len(flat) != self.inputs:
            raise ValueError(f"Expected {self.inputs} input tensors for {self.name}, "
                             f"received: {len(flat)}")  # fmt: skip
        results = context.context().call_function(
            self.name.encode(), flat + list(self.captures), len(self.outputs)
        )  # fmt: skip
        return dict(zip(self.outputs, results, strict=True))


@functools.cache
def source_digest() -> str:
    """SHA-256 of xtts-train's and xtts-audio's Python sources and of TensorFlow's and
    Keras's versions: code that builds a step's graph."""
    digest = hashlib.sha256(f"{tf.version.GIT_VERSION} {keras.__version__}\n".encode())
    for root in (Path(__file__).parents[1], Path(xtts_audio.__file__).parent):
        for path in sorted(root.rglob("*.py")):
            digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def key(name: str, signature: Any, settings: Mapping[str, Any],
        variables: Sequence[tf.Variable]) -> str:  # fmt: skip
    """The key of a program's stored trace: its name (role and shape), its input signature
    (a structure of `tf.TensorSpec`s), `settings` (JSON-able: the config it reads, the
    dtype policy, the compiler) and its variables, with `source_digest`."""
    specs = [(s.shape.as_list(), s.dtype.name) for s in tf.nest.flatten(signature)]
    # Shapes and dtypes in order, not names: Keras numbers the names of a process's second
    # model ("dense_7"), and the order is the code's, which the source digest covers.
    described = [(list(v.shape), tf.as_dtype(v.dtype).name) for v in variables]
    text = json.dumps([FORMAT, source_digest(), name, specs, settings, described],
                      sort_keys=True, default=str)  # fmt: skip
    return hashlib.sha256(text.encode()).hexdigest()


def fingerprint(program: Any) -> str:
    """SHA-256 of a program's function library: a traced concrete function's, or the
    stored one a `StoredProgram` was registered from (the same bytes)."""
    if isinstance(program, StoredProgram):
        return program.fingerprint
    return hashlib.sha256(_library(program).SerializeToString(deterministic=True)).hexdigest()


def save(folder: Path, program_key: str, program: Any,
         variables: Sequence[tf.Variable]) -> str | None:  # fmt: skip
    """Store a traced concrete function under `program_key`.

    Returns:
        Its `fingerprint` (computed from the bytes written, so a caller need not serialize
        the library again), or None, nothing written, when it cannot be registered again
        faithfully: a captured input that is none of `variables`, or a gradient registered
        by name.
    """
    index = {id(v.handle): i for i, v in enumerate(variables)}
    captures = [index.get(id(c)) for c in program.captured_inputs]
    library = _library(program)
    if None in captures or library.registered_gradients:
        logger.debug("trace of %s not stored: it captures more than its variables",
                     program.function_def.signature.name)  # fmt: skip
        return None
    data = library.SerializeToString(deterministic=True)
    header = {
        "name": program.function_def.signature.name,
        "inputs": len(program.inputs) - len(captures),
        "captures": captures,
        "outputs": sorted(program.structured_outputs),
        "sha256": hashlib.sha256(data).hexdigest(),
    }
    folder.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(folder / f"{program_key}.trace", json.dumps(header).encode() + b"\n" + data)
    return header["sha256"]


def load(folder: Path, program_key: str,
         variables: Sequence[tf.Variable]) -> StoredProgram | None:  # fmt: skip
    """The program stored under `program_key`, registered with TensorFlow's runtime and
    bound to `variables`; None when there is none (or it was damaged: then deleted)."""
    path = folder / f"{program_key}.trace"
    try:
        head, data = path.read_bytes().split(b"\n", 1)
        header = json.loads(head)
        intact = hashlib.sha256(data).hexdigest() == header["sha256"]
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError):
        intact = False
    if not intact:
        logger.warning("stored trace %s is damaged: deleted, the program is traced again", path)
        path.unlink(missing_ok=True)
        return None
    library = function_pb2.FunctionDefLibrary.FromString(data)
    ctx = context.context()
    for function in library.function:  # nested functions first, the step last (`_library`)
        if not ctx.has_function(function.signature.name):
            ctx.add_function_def(function)
    return StoredProgram(
        name=header["name"], inputs=header["inputs"],
        captures=tuple(variables[i].handle for i in header["captures"]),
        outputs=tuple(header["outputs"]), fingerprint=hashlib.sha256(data).hexdigest(),
    )  # fmt: skip


def folder_of(store: Path | None) -> Path | None:
    """Where the traces of a compile cache's store (`CompileCache.store`) live."""
    return None if store is None else store / _FOLDER


def _library(program: Any) -> function_pb2.FunctionDefLibrary:
    """A concrete function's functions: the ones it calls, then its own definition."""
    library = function_pb2.FunctionDefLibrary()
    library.CopyFrom(program.graph.as_graph_def().library)
    library.function.append(program.function_def)
    return library
