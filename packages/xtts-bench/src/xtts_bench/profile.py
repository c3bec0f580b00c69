"""Where the train step's time goes, op by op: a TensorBoard profile (XProf's xplane) of
`CompiledSteps.train`, its per-op self times grouped into the parts of the step.

The step is built as `fit` builds it (`build_steps`, `train.compiler` set to `compiler`)
for the one batch shape profiled (`bucket` of the spec), warmed up (trace, compile), run
`warm_steps` times unprofiled (their median is the reference step time), then `steps`
times under `tf.profiler.experimental` with `host_tracer_level=3`, which records every
op the executor runs (level 2 keeps only the expensive ones).

The xplane is read here (`xplane_pb2`): XProf's `framework_op_stats` keeps only its 500
largest ops, and the small ones (losses, the optimizer's elementwise ops) matter here.

- graph (the CPU default): each op the executor ran is an event `name:type`; its name
  carries the Keras name scopes (`text_to_mel_1/decoder_1/block_0_1/...`), a gradient
  op's the tape's prefix (`gradient_tape/...`): every op is attributed, forward or
  backward, but those Grappler renamed at the top level (`AddN_2/tmp_var_...`), which
  land in "other".
- xla: the events are the program's thunks (fusions, convolutions, dots, calls), each
  attributed to the TensorFlow op of its HLO metadata (the xplane holds the HLO), else
  to its fused ops', its caller's or its operand's (`_hlo_op`). A fusion often joins ops
  of several layers and all its time goes to one: XLA's parts are approximate.

Name scopes: the model's come from Keras (its layers' names, read from the built model:
`model_rules`); the loss terms and the update chain have their own (`loss_mel_l1`,
`loss_stop_bce`, `loss_guided_attention`, `alignment_score`, `update`: xtts_train's
`name_scoped`).

Times are self times (an event's duration less its children's on the same line). An
op's time per step is the median of its runs times its runs per step: on a shared
machine a run the scheduler preempted does not count as the op's cost. The shares are
of the median profiled step. With one thread (the default) ops run one after another and
the parts add up to the step, less "outside ops" (the executor between ops, the Python
call, and the preemptions the medians left out); with more, ops overlap and the parts
are op-milliseconds.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import pathlib
import re
import statistics
import sys
import tempfile
from collections.abc import Iterable, Sequence

import keras
import tensorflow as tf
import tqdm
from tensorflow.compiler.xla.service import hlo_pb2
from tensorflow.tsl.profiler.protobuf import xplane_pb2

from xtts_bench.errors import SettingsError
from xtts_bench.settings import ProfileBenchConfig
from xtts_bench.train import configure_threads, read_inputs, write_cache
from xtts_data import DatasetSpec
from xtts_train import build_steps, kept_dtype_policy, timed_step

__all__ = [
    "PARTS",
    "OpTime",
    "Rule",
    "classify",
    "format_profile_table",
    "group_ops",
    "model_rules",
    "normalize_type",
    "read_op_times",
    "run_profile_benchmark",
    "scope_pattern",
]

# The table's rows, in the order of the step; a part a new layer brings comes after.
PARTS = (
    "text encoder", "conditioning encoder", "decoder prenet", "decoder self-attention",
    "decoder cross-attention", "decoder feed-forward", "decoder residuals", "decoder other",
    "mel/stop heads", "postnet", "model glue", "loss: mel L1", "loss: stop BCE",
    "loss: guided attention", "alignment score", "update: global norm + gate",
    "update: clip", "update: AdamW", "other",
)  # fmt: skip

OpTime = tuple[str, str, float]
"""One op of the profile: (name with its scopes, type, microseconds of self time per
step)."""


@dataclasses.dataclass(frozen=True)
class Rule:
    """Ops whose name (less the `gradient_tape/` prefix) matches `pattern` belong to
    `part` and are of `kind` (attention, norm, conv, ...)."""

    pattern: re.Pattern
    part: str
    kind: str


# -- the run ---------------------------------------------------------------------------


def run_profile_benchmark(config: ProfileBenchConfig, *, progress: bool = False) -> dict:
    """Profile `config.steps` train steps of one shape; returns the breakdown
    (`group_ops`) with the settings, the shape and the step times."""
    configure_threads(config.threads)
    with tempfile.TemporaryDirectory(prefix="xtts-bench-profile-") as folder, kept_dtype_policy():
        cache = config.data or write_cache(config.train_bench(config.threads), pathlib.Path(folder))
        logdir = pathlib.Path(config.trace_dir or pathlib.Path(folder) / "trace")
        steps, batches = _build(config, pathlib.Path(cache), progress)
        unprofiled = [timed_step(steps.train, batches[i % len(batches)], step=i)[0]
                      for i in range(config.warm_steps)]  # fmt: skip
        profiled = _profiled_steps(steps, batches, config.steps, logdir)
        rows = read_op_times(logdir, steps=config.steps)
        rules = model_rules(steps.model)
    step_ms = 1e3 * statistics.median(profiled)
    return {
        "settings": {k: str(v) for k, v in dataclasses.asdict(config).items()},
        "shape": list(DatasetSpec.key_of(batches[0])),
        "compiler": config.compiler,
        "step_ms_unprofiled": 1e3 * statistics.median(unprofiled),
        **group_ops(rows, rules, step_ms=step_ms),
        "tensorflow": tf.__version__,
        "cpus": os.cpu_count(),
    }


def _build(config: ProfileBenchConfig, cache: pathlib.Path, progress: bool):
    """The steps of the profiled shape, warmed up with names on every piece, and the
    drawn batches of that shape."""
    inputs = read_inputs(config.train_bench(config.threads), cache)
    shapes = inputs.spec.shapes
    if not -len(shapes) <= config.bucket < len(shapes):
        raise SettingsError(f"ProfileBenchConfig.bucket: expected an index into the spec's "
                            f"{len(shapes)} shapes, received: bucket={config.bucket}")  # fmt: skip
    shape = shapes[config.bucket]
    batches = [b for b in inputs.batches if DatasetSpec.key_of(b) == shape.key]
    if not batches:
        raise SettingsError(f"no batch of shape {shape.key} among the first {config.batches} "
                            f"drawn: raise --batches")  # fmt: skip
    train = dataclasses.replace(inputs.stack.train, compiler=config.compiler, compile_workers=1)
    stack = dataclasses.replace(inputs.stack, train=train)
    steps = build_steps(stack, dataclasses.replace(inputs.spec, shapes=(shape,)))
    if progress:
        tqdm.tqdm.write(
            f"warming up the {config.compiler} step of shape {shape.key} ...", file=sys.stderr
        )  # stdout holds the table or the JSON
    steps.warm_up(workers=1, defer_cached=False)
    return steps, batches


def _profiled_steps(steps, batches: list, count: int, logdir: pathlib.Path) -> list[float]:
    """Seconds of each of `count` steps, run under the profiler (every op recorded)."""
    options = tf.profiler.experimental.ProfilerOptions(
        host_tracer_level=3, python_tracer_level=0, device_tracer_level=1
    )
    seconds = []
    tf.profiler.experimental.start(str(logdir), options=options)
    try:
        for index in range(count):
            with tf.profiler.experimental.Trace("train", step_num=index, _r=1):
                seconds.append(timed_step(steps.train, batches[index % len(batches)],
                                          step=index)[0])  # fmt: skip
    finally:
        tf.profiler.experimental.stop()
    return seconds


# -- reading the profile ---------------------------------------------------------------

# Ops that call a function: their time is their body's ops' (XLA's whole program is one).
_CALLS = re.compile(r"^(__inference|__forward|__backward|(Stateful)?PartitionedCall$|"
                    r"(Stateless)?(While|If)$|Case$)")  # fmt: skip
_TF_OP = re.compile(r"^([^\s:]+):([^\s:]+)$")  # the executor's events: "name:type"


def read_op_times(logdir: pathlib.Path, *, steps: int) -> list[OpTime]:
    """The ops of the profile of `steps` steps in `logdir` (its `*.xplane.pb`): (name,
    type, self-time us per step: the median run times the runs per step); XLA thunks
    named by their HLO's TensorFlow op."""
    paths = list(logdir.glob("**/*.xplane.pb"))
    if not paths:
        raise FileNotFoundError(f"Expected a profile (*.xplane.pb) under {logdir}, found none")
    space = xplane_pb2.XSpace()  # the newest: a kept trace folder may hold older runs
    space.ParseFromString(max(paths, key=lambda p: p.stat().st_mtime).read_bytes())
    hlo = _hlo_ops(space)
    runs: dict[tuple[str, tuple[str, str]], list[float]] = collections.defaultdict(list)
    for plane in space.planes:
        for line in plane.lines:
            events = []
            for event in line.events:
                label = plane.event_metadata[event.metadata_id].name
                events.append((event.offset_ps, event.duration_ps, label, _op_of(label, hlo)))
            for label, key, ps in _self_times(events):
                runs[label, key].append(ps / 1e6)
    per_step: collections.Counter = collections.Counter()
    for (_, key), us in runs.items():  # the median of each event: of each thunk under XLA
        per_step[key] += statistics.median(us) * len(us) / steps
    return [(name or kind, kind, us) for (name, kind), us in per_step.items()]


def _op_of(event: str, hlo: dict[str, tuple[str, str]]) -> tuple[str, str] | None:
    """(name, type) of an op event (an XLA thunk without metadata: ("", type), and it
    takes its parent's); None for everything else (runtime events, calls)."""
    if event in hlo:
        return hlo[event]
    match = _TF_OP.match(event)
    if match is None or _CALLS.match(match[2]):
        return None
    return match[1], match[2]


def _self_times(events: Iterable[tuple[int, int, str, tuple[str, str] | None]]):
    """(label, key, self time) of each op event of one line: its duration less that of
    the op events nested in it; a key without a name ("", type) takes the key of the op
    it is nested in. Events with key None are not ops and are skipped.

    Args:
        events: (start, duration, label, key) in any order, times in one unit.
    """
    ops = sorted((e for e in events if e[3] is not None), key=lambda e: (e[0], -e[1]))
    stack: list[list] = []  # [end, label, key, self time]
    for start, duration, label, key in ops:
        while stack and stack[-1][0] <= start:
            yield tuple(stack.pop()[1:])
        if stack:
            stack[-1][3] -= duration
            if not key[0]:
                key = stack[-1][2]
        stack.append([start + duration, label, key, duration])
    while stack:
        yield tuple(stack.pop()[1:])


def _hlo_ops(space) -> dict[str, tuple[str, str]]:
    """HLO instruction name -> (TensorFlow op name, type) from the XLA programs the
    profile holds (the `/host:metadata` plane); on a clash, the largest program's."""
    modules = []
    for plane in space.planes:
        stats = {key: meta.name for key, meta in plane.stat_metadata.items()}
        for meta in plane.event_metadata.values():
            for stat in meta.stats:
                if stats.get(stat.metadata_id) == "Hlo Proto":
                    proto = hlo_pb2.HloProto()
                    proto.ParseFromString(stat.bytes_value)
                    modules.append(proto.hlo_module)
    ops: dict[str, tuple[str, str]] = {}
    for module in sorted(modules, key=lambda m: -len(m.computations)):
        computations = {c.id: c for c in module.computations}
        callers = {}  # computation id -> (the instruction calling it, its computation id)
        for computation in module.computations:
            for instruction in computation.instructions:
                for called in instruction.called_computation_ids:
                    callers.setdefault(called, (instruction, computation.id))
        for computation in module.computations:
            local = {i.id: i for i in computation.instructions}
            for instruction in computation.instructions:
                operands = [local[i] for i in instruction.operand_ids if i in local]
                op = _hlo_op(instruction, operands, computation.id, computations, callers)
                ops.setdefault(instruction.name, op)
    return ops


def _hlo_op(instruction, operands, home: int, computations, callers) -> tuple[str, str]:
    """The instruction's TensorFlow op and type: from its metadata, else the commonest
    among the instructions it calls (a fusion's), else its callers' (an instruction of a
    called computation: the random-number generator's), else (the name only) its first
    operand's (a reduction XLA added: a bias gradient's sum); no name: ""."""
    inner = [i.metadata for c in instruction.called_computation_ids
             for i in computations[c].instructions]  # fmt: skip
    name = instruction.metadata.op_name or _commonest(m.op_name for m in inner)
    op_type = (instruction.metadata.op_type
               or _commonest(m.op_type for m in inner if m.op_name == name))  # fmt: skip
    while not name and home in callers:
        caller, home = callers[home]
        name, op_type = caller.metadata.op_name, op_type or caller.metadata.op_type
    name = name or next((o.metadata.op_name for o in operands if o.metadata.op_name), "")
    if not op_type and name:  # a TensorFlow op's own name ends with its type's, mostly
        op_type = f"{name.rsplit('/', 1)[-1]} (hlo {instruction.opcode})"
    return name, op_type or f"hlo {instruction.opcode}"


def _commonest(values: Iterable[str]) -> str:
    counts = collections.Counter(v for v in values if v)
    return counts.most_common(1)[0][0] if counts else ""


# -- grouping --------------------------------------------------------------------------


def scope_pattern(path: Sequence[str]) -> re.Pattern:
    """Ops inside the name scopes `path` (layer names), each scope with TensorFlow's
    uniquifying suffixes (`decoder` matches `decoder_1`), anywhere in an op's name."""
    scopes = "/".join(re.escape(name) + r"(?:_\d+)*" for name in path)
    return re.compile(rf"(?:^|/){scopes}/")


# Fixed scopes: the loss terms and the update (xtts_train's own), the prenet's keep masks
# (drawn at the model's top level by `Decoder.prenet_keep`, under `dropout_mask`), the
# update's pieces by the scopes TensorFlow gives them; most specific first.
_FIXED = (
    (("update", "global_norm"), "update: global norm + gate", "optimizer"),
    (("update", "clip_by_global_norm"), "update: clip", "optimizer"),
    (("update",), "update: AdamW", "optimizer"),
    (("loss_mel_l1",), "loss: mel L1", "loss"),
    (("loss_stop_bce",), "loss: stop BCE", "loss"),
    (("loss_guided_attention",), "loss: guided attention", "loss"),
    (("alignment_score",), "alignment score", "loss"),
)
_KINDS = {"MultiHeadAttention": "attention", "LayerNormalization": "norm", "Conv1D": "conv",
          "Embedding": "embedding", "Dropout": "dropout", "Dense": "dense"}  # fmt: skip
_COMPONENTS = {"text_encoder": "text encoder", "cond_encoder": "conditioning encoder",
               "mel_head": "mel/stop heads", "stop_head": "mel/stop heads",
               "postnet": "postnet", "decoder": "decoder other"}  # fmt: skip
_DECODER = {"prenet": "decoder prenet", "project": "decoder prenet", "blocks": "decoder residuals"}
_BLOCK = {"self_norm": "self-attention", "self_attn": "self-attention",
          "cross_norm": "cross-attention", "cross_attn": "cross-attention",
          "ff_norm": "feed-forward", "ff_in": "feed-forward", "ff_out": "feed-forward",
          "drop": "residuals"}  # fmt: skip


def model_rules(model: keras.Model) -> list[Rule]:
    """The rules of a built `TextToMel`: one per layer, from its name scope path; its part
    from the component holding it (the decoder's blocks by role: self-attention,
    cross-attention, feed-forward, residuals), its kind from its class."""
    root = (model.name,)
    found = [(root, "model glue", "other"),
             ((*root, "dropout_mask"), "decoder prenet", "dropout")]  # fmt: skip
    for attr, layer in _sublayers(model):
        part = _COMPONENTS.get(attr, attr.replace("_", " "))
        found += _layer_rules((*root, layer.name), layer, part, attr == "decoder")
    rules = [Rule(scope_pattern(path), part, kind) for path, part, kind in _FIXED]
    found.sort(key=lambda rule: (-len(rule[0]), -len(rule[0][-1])))  # deepest, longest first
    return rules + [Rule(scope_pattern(path), part, kind) for path, part, kind in found]


def _layer_rules(path, layer, part: str, decoder: bool, block: bool = False) -> list:
    rules = [(path, part, _KINDS.get(type(layer).__name__, "other"))]
    for attr, child in _sublayers(layer):
        child_part, kind = part, None
        if decoder:
            child_part = _DECODER.get(attr, part)
        if block and attr in _BLOCK:
            kind = "feed-forward" if attr in ("ff_in", "ff_out") else None
            child_part = f"decoder {_BLOCK[attr]}" if part.startswith("decoder") else part
        child_rules = _layer_rules((*path, child.name), child, child_part, False,
                                   block=attr == "blocks")  # fmt: skip
        if kind is not None:
            child_rules = [(p, q, kind) for p, q, _ in child_rules]
        rules += child_rules
    return rules


def _sublayers(layer) -> list[tuple[str, keras.layers.Layer]]:
    """(attribute, sublayer) of the public attributes holding a layer or a list of them."""
    found = []
    for attr, value in vars(layer).items():
        items = value if isinstance(value, list | tuple) else [value]
        if not attr.startswith("_"):
            found += [(attr, item) for item in items if isinstance(item, keras.layers.Layer)]
    return found


_DROPOUT = re.compile(
    r"(?:^|/)(?:dropout(?:_mask)?(?:_\d+)*|stateless_dropout|stateless_random_\w+)/"
)
_BACKWARD = "gradient_tape/"


def classify(name: str, rules: Sequence[Rule]) -> tuple[str, str, bool]:
    """(part, kind, backward) of the op `name`: the first rule matching it (less the
    tape's prefix) decides; dropout (its masks' random draws and their use) is its own
    kind inside any part; no rule: ("other", "other")."""
    backward = name.startswith(_BACKWARD)
    forward_name = name[len(_BACKWARD) :] if backward else name
    part, kind = "other", "other"
    for rule in rules:
        if rule.pattern.search(forward_name):
            part, kind = rule.part, rule.kind
            break
    if _DROPOUT.search(forward_name):
        kind = "dropout"
    return part, kind, backward


def normalize_type(op_type: str) -> str:
    """TensorFlow's type without oneDNN's rewrite prefix: `_MklNativeFusedConv2D` ->
    `FusedConv2D`, `_MklBatchMatMulV2` -> `BatchMatMulV2`."""
    return re.sub(r"^_(?:MklNative|Mkl)?", "", op_type)


def group_ops(
    rows: Iterable[OpTime], rules: Sequence[Rule], *, step_ms: float, top: int = 15
) -> dict:
    """Milliseconds per step of each part (forward, backward, by kind), kind and op type.

    Args:
        rows: (op name, op type, self-time us per step).
        rules: `model_rules` (or any) for `classify`.
        step_ms: the step's wall time: shares are of it, and what the ops do not cover
            is the row "outside ops".
        top: op types (and single ops) listed.

    Returns:
        `parts` [{part, forward_ms, backward_ms, ms, share, kinds: {kind: ms}}] in `PARTS`
        order (parts without ops left out, "outside ops" last), `kinds` and `op_types`
        [{kind|type, ms, share, ops}] by time, `top_ops` [{name, type, part, ms}],
        `op_ms` (all ops), `step_ms`.
    """
    parts: dict[str, list] = collections.defaultdict(lambda: [0.0, 0.0, collections.Counter()])
    kinds, types, ops = collections.Counter(), collections.Counter(), []
    type_ops: collections.Counter = collections.Counter()
    for name, op_type, us in rows:
        ms, (part, kind, backward) = us / 1e3, classify(name, rules)
        parts[part][backward] += ms
        parts[part][2][kind] += ms
        kinds[kind] += ms
        types[normalize_type(op_type)] += ms
        type_ops[normalize_type(op_type)] += 1
        ops.append({"name": name, "type": op_type, "part": part, "ms": ms})
    op_ms = sum(kinds.values())
    order = [p for p in PARTS if p in parts] + sorted(set(parts) - set(PARTS))
    table = [_part(p, *parts[p], step_ms) for p in order]
    table.append(_part("outside ops", max(step_ms - op_ms, 0.0), 0.0, {}, step_ms))
    return {
        "step_ms": step_ms,
        "op_ms": op_ms,
        "parts": table,
        "kinds": [{"kind": k, "ms": ms, "share": ms / step_ms} for k, ms in kinds.most_common()],
        "op_types": [
            {"type": t, "ms": ms, "share": ms / step_ms, "ops": type_ops[t]}
            for t, ms in types.most_common(top)
        ],
        "top_ops": sorted(ops, key=lambda op: -op["ms"])[:top],
    }


def _part(part: str, forward: float, backward: float, kinds, step_ms: float) -> dict:
    total, kinds = forward + backward, dict(collections.Counter(kinds).most_common())
    return {"part": part, "forward_ms": forward, "backward_ms": backward, "ms": total,
            "share": total / step_ms, "kinds": kinds}  # fmt: skip


# -- the table -------------------------------------------------------------------------


def format_profile_table(result: dict) -> str:
    """Parts (forward, backward, of which dropout, total ms per step, share of the step),
    kinds, the top op types and the largest single ops."""
    b, t, f = result["shape"]
    lines = [
        f"{result['compiler']} train step, batch {b} x text {t} x frames {f}: "
        f"{result['step_ms_unprofiled']:.1f} ms unprofiled, {result['step_ms']:.1f} ms "
        f"profiled (medians); ops {result['op_ms']:.1f} ms",
        "",
        f"{'part':<28}{'fwd ms':>8}{'bwd ms':>8}{'dropout':>8}{'ms':>8}{'share':>8}",
    ]
    for row in result["parts"]:
        lines.append(f"{row['part']:<28}{row['forward_ms']:>8.2f}{row['backward_ms']:>8.2f}"
                     f"{row['kinds'].get('dropout', 0.0):>8.2f}{row['ms']:>8.2f}"
                     f"{row['share']:>8.1%}")  # fmt: skip
    lines += ["", f"{'kind (whole model)':<28}{'ms':>8}{'share':>8}"]
    lines += [f"{r['kind']:<28}{r['ms']:>8.2f}{r['share']:>8.1%}" for r in result["kinds"]]
    lines += ["", f"{'op type':<40}{'ops':>6}{'ms':>8}{'share':>8}"]
    lines += [f"{r['type'][:39]:<40}{r['ops']:>6}{r['ms']:>8.2f}{r['share']:>8.1%}"
              for r in result["op_types"]]  # fmt: skip
    lines += ["", f"{'largest ops':<80}{'ms':>8}"]
    lines += [f"{_tail(r['name'], 79):<80}{r['ms']:>8.2f}" for r in result["top_ops"][:10]]
    return "\n".join(lines)


def _tail(text: str, width: int) -> str:
    return text if len(text) <= width else "..." + text[-(width - 3) :]
