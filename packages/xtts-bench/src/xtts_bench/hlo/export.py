"""`xtts-bench hlo export`: the XLA programs a run compiles, as HLO protos a jaxlib can run.

For a stack config (and `--set` overrides) the train steps are built as `fit` builds them
(`xtts_train.build_steps`, `train.compiler` forced to `xla`), one per bucket shape: the
shapes of a prepared cache's pipeline (`data`) or those planned for LJSpeech's lengths
(`ljspeech`). Each step's HloModuleProto comes from TensorFlow
(`experimental_get_compiler_ir(...)(stage="hlo_serialized")`), lowered for this machine's
CPU (tensorflow-cpu lowers for nothing else). Written into `out`:

- `<program>.hlo.pb.gz`: the proto of each program (`train_<batch>x<text>x<frames>`),
  gzipped: a program travels at a thirteenth of its size (the base preset's longest
  LJSpeech step: 19.7 MB, 1.5 MB gzipped), against 64 MiB a command to a GPU machine;
- `manifest.json`: per program its parameters (`xtts_bench.hlo.parameters`: index, name,
  role, shape, dtype, fill rule), outputs, the header's output<->parameter aliases (the
  updated variables), and FLOPs: none here, TensorFlow exposes no XLA cost analysis for
  a `tf.function`; the runner reports the compiling XLA's own;
- `runner.py` (`xtts_bench.hlo.runner`), which runs them with jax alone;
- with `inputs`: `<program>.inputs.npz`, the program's parameters as exported (a real
  batch of the cache and the initial state), for checking the runner against TensorFlow.
"""

from __future__ import annotations

import dataclasses
import gzip
import pathlib
import shutil

import numpy as np
import tensorflow as tf
from tensorflow.compiler.xla.service import hlo_pb2

import xtts_data as xd
from xtts_audio import num_frames
from xtts_bench.errors import SettingsError
from xtts_bench.hlo import runner
from xtts_bench.hlo.parameters import (
    argument_names,
    batch_fill,
    resolve_lengths,
    value_fill,
    variable_roles,
)
from xtts_data.files import write_json_atomic
from xtts_train import StackConfig, build_steps, kept_dtype_policy, load_stack_config, task_class

__all__ = ["ExportConfig", "Program", "build_programs", "export_hlo", "format_export",
           "hlo_header", "ljspeech_spec", "load_parameters", "parameter_values",
           "write_programs"]  # fmt: skip

_NO_FLOPS = ("TensorFlow exposes no XLA cost analysis for a tf.function: none computed "
             "here; the runner reports the compiling XLA's own (its executable's "
             "cost_analysis)")  # fmt: skip


@dataclasses.dataclass(frozen=True, kw_only=True)
class ExportConfig:
    """What `export_hlo` writes.

    Attributes:
        out: the folder written (created).
        config: a stack config YAML (a recipe), or None for the defaults.
        overrides: `section.key=value` settings applied after it (as `xtts-train --set`).
        data: a prepared feature cache: its pipeline's bucket shapes.
        ljspeech: instead of `data`, the shapes planned for LJSpeech's lengths.
        buckets: indices into the spec's shapes to export (None: all).
        inputs: also write each program's parameters (`<program>.inputs.npz`): a real
            batch (with `data`) and the initial state, for a check against TensorFlow.
    """

    out: pathlib.Path
    config: pathlib.Path | None = None
    overrides: tuple[str, ...] = ()
    data: pathlib.Path | None = None
    ljspeech: bool = False
    buckets: tuple[int, ...] | None = None
    inputs: bool = False

    def __post_init__(self) -> None:
        if (self.data is None) == (not self.ljspeech):
            raise SettingsError(f"Expected one source of batch shapes, a cache (--data) or "
                                f"--ljspeech, received: data={self.data}, "
                                f"ljspeech={self.ljspeech}")  # fmt: skip
        if self.inputs and self.data is None:
            raise SettingsError("Expected --data with --inputs (a real batch), received "
                                "--ljspeech")  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Program:
    """One program to export: `function(*inputs)` is what a run calls.

    Attributes:
        name: `train_<batch>x<text>x<frames>`.
        kind: `train`.
        key: the batch shape's key.
        function: the `tf.function` (XLA-compiled) of the step.
        inputs: its arguments: (batch, apply, hyper) of a train step.
    """

    name: str
    kind: str
    key: tuple[int, ...]
    function: tf.types.experimental.PolymorphicFunction
    inputs: tuple


# -- building ----------------------------------------------------------------------------


def ljspeech_spec(stack: StackConfig) -> xd.DatasetSpec:
    """The stack's batch shapes on LJSpeech's lengths (1.1-10.1 s, spread evenly; ~17
    symbols a second), as `xtts_data.plan_shapes` plans them."""
    seconds = np.linspace(1.1, 10.1, 1000)
    frames = num_frames((seconds * stack.audio.sample_rate).astype(np.int64), stack.audio)
    tokens = np.ceil(seconds * 17).astype(np.int64) + 1
    shapes = xd.plan_shapes(frames, tokens, stack.data)
    return xd.DatasetSpec(tuple(shapes), stack.audio.n_mels, stack.data.cond_frames)


def _stack_and_pipeline(config: ExportConfig):
    """The stack (compiler xla, configured for the cache) and the cache's train pipeline
    (None with `ljspeech`), and the spec."""
    stack = load_stack_config(config.config, config.overrides, cache=config.data)
    train = dataclasses.replace(stack.train, compiler="xla", compile_workers=1)
    stack = dataclasses.replace(stack, train=train)
    task = task_class(stack.train.task)
    if config.data is None:
        return stack, None, ljspeech_spec(stack)
    opened = xd.FeatureCache.open(config.data, audio=stack.audio, data=stack.data)
    stack = task.configure(stack, opened.tokenizer)
    pipeline = task.pipeline(opened, stack.data, "train", repeat=True)
    return stack, pipeline, pipeline.spec


def _chosen_shapes(spec, buckets: tuple[int, ...] | None) -> list:
    shapes = list(spec.shapes)
    if buckets is None:
        return shapes
    for index in buckets:
        if not -len(shapes) <= index < len(shapes):
            raise SettingsError(f"--bucket: expected an index into the spec's {len(shapes)} "
                                f"shapes, received: {index}")  # fmt: skip
    return [shapes[i] for i in buckets]


def _first_batches(pipeline, keys: set, *, limit: int = 500) -> dict:
    """The first batch of each shape in `keys` among the pipeline's first `limit`."""
    found: dict = {}
    for _, batch in zip(range(limit), pipeline.dataset, strict=False):
        key = pipeline.spec.key_of(batch)
        if key in keys:
            found.setdefault(key, batch)
        if len(found) == len(keys):
            break
    return found


def build_programs(config: ExportConfig):
    """The steps (`CompiledSteps`, nothing compiled) and a `Program` per chosen shape.

    Call it inside `kept_dtype_policy()`: it sets the run's Keras dtype policy.

    Returns:
        (stack, steps, programs).
    """
    stack, pipeline, spec = _stack_and_pipeline(config)
    shapes = _chosen_shapes(spec, config.buckets)
    # The programs run on another machine: its memory is what the runner measures.
    steps = build_steps(stack, dataclasses.replace(spec, shapes=tuple(shapes)),
                        check_memory=False)  # fmt: skip
    real = _first_batches(pipeline, {s.key for s in shapes}) if config.inputs else {}
    function = steps.step_function("train")  # what `fit` compiles per shape
    # At the peak learning rate: an update that changes the weights.
    hyper = steps.hyper(stack.train.warmup_steps)
    programs = []
    for shape in shapes:
        batch = real.get(shape.key) or steps.task.placeholder_batch(spec.signature(shape))
        name = "train_" + "x".join(map(str, shape.key))
        programs.append(Program(name, "train", tuple(shape.key), function,
                                (dict(batch), tf.constant(True), hyper)))  # fmt: skip
    return stack, steps, programs


# -- the header and the parameters -------------------------------------------------------


def _enum_name(message, field: str) -> str:
    """The name of the enum value in `message.field`."""
    enum = message.DESCRIPTOR.fields_by_name[field].enum_type
    return enum.values_by_number[getattr(message, field)].name


def _dtype(shape) -> str:
    """The NumPy dtype name of an XLA `ShapeProto`'s element type."""
    name = _enum_name(shape, "element_type")
    names = {"PRED": "bool", "BF16": "bfloat16"}
    if name in names:
        return names[name]
    return {"S": "int", "U": "uint", "F": "float"}[name[0]] + name[1:]


def hlo_header(proto: bytes) -> dict:
    """The module's parameters and outputs [(shape, dtype)] and its output<->parameter
    aliases [{output, parameter, kind}] (`input_output_alias`: each updated variable)."""
    module = hlo_pb2.HloModuleProto()
    module.ParseFromString(proto)
    program = module.host_program_shape
    result = program.result
    outputs = list(result.tuple_shapes) if result.tuple_shapes else [result]
    aliases = [
        {"output": int(entry.output_shape_index[0]), "parameter": int(entry.parameter_number),
         "kind": _enum_name(entry, "kind").lower()}
        for entry in module.input_output_alias.entries
    ]  # fmt: skip
    return {
        "parameters": [(list(s.dimensions), _dtype(s)) for s in program.parameters],
        "outputs": [(list(s.dimensions), _dtype(s)) for s in outputs],
        "aliases": aliases,
    }


def parameter_values(program: Program, steps) -> list[np.ndarray]:
    """The program's parameters now: its flat arguments, then the variables it captures
    (`captured_inputs`), in the order of the exported module's parameters."""
    concrete = program.function.get_concrete_function(*program.inputs)
    roles = variable_roles(steps)
    arguments = [t.numpy() for t in tf.nest.flatten(program.inputs)]
    return arguments + [roles[id(h)][1].numpy() for h in concrete.captured_inputs]


def load_parameters(program: Program, steps, values: list[np.ndarray]) -> tuple:
    """Set the variables the program captures to `values`' (in parameter order, as
    `parameter_values` returns them); returns its arguments built from the rest."""
    concrete = program.function.get_concrete_function(*program.inputs)
    count = len(tf.nest.flatten(program.inputs))
    roles = variable_roles(steps)
    for handle, value in zip(concrete.captured_inputs, values[count:], strict=True):
        roles[id(handle)][1].assign(value)
    arguments = [tf.constant(value) for value in values[:count]]
    return tuple(tf.nest.pack_sequence_as(program.inputs, arguments))


def describe_parameters(program: Program, steps, stack: StackConfig) -> list[dict]:
    """The manifest entries of the program's parameters (`xtts_bench.hlo.parameters`)."""
    concrete = program.function.get_concrete_function(*program.inputs)
    names = [name for label, value in zip(("batch", "apply", "hyper"), program.inputs,
                                          strict=True)
             for name in argument_names(value, f"{label}/")]  # fmt: skip
    flat = tf.nest.flatten(program.inputs)
    entries = []
    for name, tensor in zip(names, flat, strict=True):
        role = name.split("/")[0]
        if role == "batch":
            spec = tf.TensorSpec(tensor.shape, tensor.dtype)
            fill = batch_fill(name.split("/", 1)[1], spec, vocab_size=stack.model.vocab_size,
                              cond_frames=stack.data.cond_frames)  # fmt: skip
        else:
            role = "flag" if role == "apply" else role
            fill = value_fill(tensor.numpy(), role)
        entries.append(_entry(len(entries), name, role, tensor, fill))
    roles = variable_roles(steps)
    for handle in concrete.captured_inputs:
        role, variable, fill = roles[id(handle)]
        value = variable.numpy()
        name = getattr(variable, "path", None) or variable.name.removesuffix(":0")
        entries.append(_entry(len(entries), name, role, value, fill or value_fill(value, role)))
    resolve_lengths(entries)
    return entries


def _entry(index: int, name: str, role: str, value, fill: dict) -> dict:
    return {"index": index, "name": name, "role": role, "shape": list(value.shape),
            "dtype": np.dtype(value.dtype.as_numpy_dtype if hasattr(value.dtype, "as_numpy_dtype")
                              else value.dtype).name, "fill": fill}  # fmt: skip


def _outputs(program: Program, header: dict, parameters: list[dict]) -> list[dict]:
    """The module's outputs: the function's (dict keys sorted), then updated variables."""
    concrete = program.function.get_concrete_function(*program.inputs)
    names = argument_names(concrete.structured_outputs)
    updates = {a["output"]: parameters[a["parameter"]]["name"] for a in header["aliases"]}
    found = []
    for index, (shape, dtype) in enumerate(header["outputs"]):
        name = names[index] if index < len(names) else f"updated {updates.get(index, index)}"
        found.append({"index": index, "name": name, "shape": shape, "dtype": dtype})
    return found


def _checked(parameters: list[dict], header: dict, name: str) -> None:
    """The parameters described must be the module's, in order (shape and dtype)."""
    described = [(p["shape"], p["dtype"]) for p in parameters]
    if described != header["parameters"]:
        first = next((i for i, (a, b) in enumerate(zip(described, header["parameters"],
                                                       strict=False)) if a != b),
                     min(len(described), len(header["parameters"])))  # fmt: skip
        raise RuntimeError(
            f"{name}: the module's {len(header['parameters'])} parameters are not the "
            f"{len(described)} described; first difference at {first}"
        )


# -- writing -----------------------------------------------------------------------------


def _export_one(program: Program, steps, stack: StackConfig, out: pathlib.Path,
                inputs: bool) -> dict:  # fmt: skip
    """Write one program's proto (and inputs); its manifest entry."""
    ir = program.function.experimental_get_compiler_ir(*program.inputs)
    proto = ir(stage="hlo_serialized")
    header = hlo_header(proto)
    parameters = describe_parameters(program, steps, stack)
    _checked(parameters, header, program.name)
    (out / f"{program.name}.hlo.pb.gz").write_bytes(gzip.compress(proto, mtime=0))
    entry = {"name": program.name, "kind": program.kind, "shape": list(program.key),
             "file": f"{program.name}.hlo.pb.gz", "hlo_bytes": len(proto),
             "parameters": parameters, "outputs": _outputs(program, header, parameters),
             "aliases": header["aliases"], "flops": None}  # fmt: skip
    if inputs:
        values = parameter_values(program, steps)
        np.savez_compressed(
            out / f"{program.name}.inputs.npz", **{f"p{i}": v for i, v in enumerate(values)}
        )
        entry["inputs"] = f"{program.name}.inputs.npz"
    return entry


def export_hlo(config: ExportConfig) -> dict:
    """Write the programs, `manifest.json` and `runner.py` into `config.out`; returns the
    manifest."""
    with kept_dtype_policy():
        stack, steps, programs = build_programs(config)
        return write_programs(config, stack, steps, programs)


def write_programs(config: ExportConfig, stack: StackConfig, steps, programs) -> dict:
    """Write `build_programs`' programs, `manifest.json` and `runner.py` into `config.out`;
    returns the manifest."""
    config.out.mkdir(parents=True, exist_ok=True)
    entries = [_export_one(p, steps, stack, config.out, config.inputs) for p in programs]
    manifest = {
        "format": runner.FORMAT,
        "tensorflow": tf.__version__,
        "lowered_for": "cpu",
        "config": None if config.config is None else str(config.config),
        "overrides": list(config.overrides),
        "shapes_from": "ljspeech (planned)" if config.ljspeech else str(config.data),
        "model": {
            "d_model": stack.model.d_model,
            "vocab_size": stack.model.vocab_size,
            "precision": stack.train.precision,
        },
        "flops_note": _NO_FLOPS,
        "programs": entries,
    }
    write_json_atomic(config.out / "manifest.json", manifest)
    shutil.copyfile(runner.__file__, config.out / "runner.py")
    return manifest


def format_export(manifest: dict, out: pathlib.Path) -> str:
    """One line per program: its parameters by role and the proto's size."""
    lines = [f"{'program':<24}{'params':>8}{'aliases':>9}{'MB':>8}  roles"]
    for entry in manifest["programs"]:
        roles: dict[str, int] = {}
        for parameter in entry["parameters"]:
            roles[parameter["role"]] = roles.get(parameter["role"], 0) + 1
        counts = ", ".join(f"{role} {n}" for role, n in roles.items())
        lines.append(
            f"{entry['name']:<24}{len(entry['parameters']):>8}"
            f"{len(entry['aliases']):>9}{entry['hlo_bytes'] / 1e6:>8.2f}  {counts}"
        )
    lines.append(f"written to {out}: run them with `python {out / 'runner.py'} {out}`")
    return "\n".join(lines)
