"""`xtts-bench hlo export`: the XLA programs a run compiles, as HLO protos a jaxlib can run.

The programs (`xtts_bench.hlo.programs`: each bucket's train and eval step, a text-to-mel
run's decoding) are built as the run builds them; each one's HloModuleProto comes from
TensorFlow (`experimental_get_compiler_ir(...)(stage="hlo_serialized")`), lowered for this
machine's CPU (tensorflow-cpu lowers for nothing else). Written into `out`:

- `<program>.hlo.pb.gz`: the proto of each program (`train_<batch>x<text>x<frames>`, ...),
  gzipped: a program travels at a thirteenth of its size (the base preset's longest
  LJSpeech step: 19.7 MB, 1.5 MB gzipped), against 64 MiB a command to a GPU machine;
- `manifest.json`: per program its parameters (`xtts_bench.hlo.parameters`: index, name,
  role, shape, dtype, fill rule), outputs, the header's output<->parameter aliases (the
  updated variables), a decoding's buffer `frames`, and FLOPs: none here, TensorFlow
  exposes no XLA cost analysis for a `tf.function`; the runner reports the compiling
  XLA's own;
- `runner.py` (`xtts_bench.hlo.runner`), which runs them with jax alone;
- with `inputs`: `<program>.inputs.npz`, the program's parameters as exported (a real
  batch of the cache and the initial state), for checking the runner against TensorFlow.
"""

from __future__ import annotations

import gzip
import pathlib
import shutil

import numpy as np
import tensorflow as tf
from tensorflow.compiler.xla.service import hlo_pb2

from xtts_bench.hlo import runner
from xtts_bench.hlo.parameters import (
    argument_names,
    batch_fill,
    resolve_lengths,
    value_fill,
    variable_roles,
)
from xtts_bench.hlo.programs import ExportConfig, Program, build_programs
from xtts_data.files import write_json_atomic
from xtts_train import StackConfig, kept_dtype_policy

__all__ = ["export_hlo", "format_export", "hlo_header", "load_parameters", "parameter_values",
           "write_programs"]  # fmt: skip

_NO_FLOPS = ("TensorFlow exposes no XLA cost analysis for a tf.function: none computed "
             "here; the runner reports the compiling XLA's own (its executable's "
             "cost_analysis)")  # fmt: skip


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
    concrete = program.concrete
    roles = variable_roles(steps)
    arguments = [t.numpy() for t in tf.nest.flatten(program.inputs)]
    return arguments + [roles[id(h)][1].numpy() for h in concrete.captured_inputs]


def load_parameters(program: Program, steps, values: list[np.ndarray]) -> tuple:
    """Set the variables the program captures to `values`' (in parameter order, as
    `parameter_values` returns them); returns its arguments built from the rest."""
    concrete = program.concrete
    count = len(tf.nest.flatten(program.inputs))
    roles = variable_roles(steps)
    for handle, value in zip(concrete.captured_inputs, values[count:], strict=True):
        roles[id(handle)][1].assign(value)
    arguments = [tf.constant(value) for value in values[:count]]
    return tuple(tf.nest.pack_sequence_as(program.inputs, arguments))


def describe_parameters(program: Program, steps, stack: StackConfig) -> list[dict]:
    """The manifest entries of the program's parameters (`xtts_bench.hlo.parameters`)."""
    concrete = program.concrete
    names = [name for label, value in zip(program.labels, program.inputs, strict=True)
             for name in argument_names(value, f"{label}/")]  # fmt: skip
    flat = tf.nest.flatten(program.inputs)
    by_name = dict(zip(names, flat, strict=True))
    # The clip's padded frames: the crop's in a batch, the reference's in a decoding.
    cond = by_name.get("batch/cond_mel")
    cond_frames = stack.data.cond_frames if cond is None else int(cond.shape[1])
    entries = []
    for name, tensor in by_name.items():
        role = name.split("/")[0]
        if role == "batch":
            spec = tf.TensorSpec(tensor.shape, tensor.dtype)
            fill = batch_fill(name.split("/", 1)[1], spec, vocab_size=stack.model.vocab_size,
                              cond_frames=cond_frames)  # fmt: skip
        else:
            role = "flag" if role == "apply" else role
            fill = value_fill(tensor.numpy(), role)
        entries.append(_entry(len(entries), name, role, tensor, program.fills.get(name, fill)))
    roles = variable_roles(steps)
    for handle in concrete.captured_inputs:
        role, variable, fill = roles[id(handle)]
        value = variable.numpy()
        name = getattr(variable, "path", None) or variable.name.removesuffix(":0")
        fill = program.fills.get(name) or fill or value_fill(value, role)
        entries.append(_entry(len(entries), name, role, value, fill))
    resolve_lengths(entries)
    return entries


def _entry(index: int, name: str, role: str, value, fill: dict) -> dict:
    return {"index": index, "name": name, "role": role, "shape": list(value.shape),
            "dtype": np.dtype(value.dtype.as_numpy_dtype if hasattr(value.dtype, "as_numpy_dtype")
                              else value.dtype).name, "fill": fill}  # fmt: skip


def _outputs(program: Program, header: dict, parameters: list[dict]) -> list[dict]:
    """The module's outputs: the function's (dict keys sorted), then updated variables."""
    concrete = program.concrete
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
    if program.frames is not None:
        entry["frames"] = program.frames  # a decoding's buffer
    if program.share is not None:
        entry["batch_share"] = program.share  # of an epoch's batches: `hlo predict` mixes
        entry["batch_frames"] = list(program.batch_frames)  # rows, padded frames a row
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
        "task": stack.train.task,
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
