"""`xtts-bench profile`: reading op events, grouping ops into the parts of the step, the
settings (profiling a real step takes a minute: run by hand, figures in docs/train/train-step.md)."""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


import pytest
import tensorflow as tf
from tensorflow.tsl.profiler.protobuf import xplane_pb2

import xtts_train.models.text_to_mel.losses
from xtts_bench import profile
from xtts_bench.errors import SettingsError
from xtts_bench.settings import ProfileBenchConfig
from xtts_train import TextToMel
from xtts_train.config import load_stack_config

# Hand-written rules, as `model_rules` builds them: deepest scope first.
RULES = [
    profile.Rule(profile.scope_pattern(path), part, kind)
    for path, part, kind in [
        (("update", "clip_by_global_norm"), "update: clip", "optimizer"),
        (("update",), "update: AdamW", "optimizer"),
        (("loss_mel_l1",), "loss: mel L1", "loss"),
        (
            ("text_to_mel", "decoder", "block_0", "cross_mha"),
            "decoder cross-attention",
            "attention",
        ),
        (("text_to_mel", "decoder", "block_0", "mha"), "decoder self-attention", "attention"),
        (("text_to_mel", "postnet"), "postnet", "conv"),
        (("text_to_mel",), "model glue", "other"),
    ]
]
SELF = "text_to_mel_1/decoder_1/block_0_1/mha_1"  # scopes get TensorFlow's suffixes
CROSS = "text_to_mel_1/decoder_1/block_0_1/cross_mha_2"
# (name, type, us per step)
ROWS = [
    (f"{SELF}/MatMul", "_MklBatchMatMulV2", 3000.0),
    (f"gradient_tape/{SELF}/MatMul/MatMul", "_MklBatchMatMulV2", 5000.0),
    (f"{CROSS}/softmax/Softmax", "_MklSoftmax", 1000.0),
    (f"{SELF}/dropout_3_1/stateless_dropout/stateless_random_uniform/StatelessRandomUniformV2",
     "StatelessRandomUniformV2", 2000.0),
    ("text_to_mel_1/postnet_1/conv1d_1/convolution", "_MklNativeFusedConv2D", 4000.0),
    ("loss_mel_l1/Abs", "Abs", 500.0),
    ("gradient_tape/loss_mel_l1/Abs/Sign", "Sign", 250.0),
    ("update/clip_by_global_norm/mul", "Mul", 250.0),
    ("update/SelectV2", "SelectV2", 1000.0),
    ("AddN_2/tmp_var_initializer", "Assign", 1000.0),
]  # fmt: skip


@pytest.mark.parametrize(("name", "expected"), [
    (f"{SELF}/MatMul", ("decoder self-attention", "attention", False)),
    (f"gradient_tape/{SELF}/MatMul/MatMul", ("decoder self-attention", "attention", True)),
    (f"{CROSS}/softmax/Softmax", ("decoder cross-attention", "attention", False)),
    (f"{SELF}/dropout_3_1/stateless_dropout/SelectV2", ("decoder self-attention", "dropout", False)),
    ("gradient_tape/loss_mel_l1/Abs/Sign", ("loss: mel L1", "loss", True)),
    ("update/clip_by_global_norm/mul", ("update: clip", "optimizer", False)),
    ("text_to_mel_1/strided_slice_8", ("model glue", "other", False)),
    ("AddN_2/tmp_var_initializer", ("other", "other", False)),
    ("my_update/mul", ("other", "other", False)),  # a scope is a whole path component
])  # fmt: skip
def test_classify_by_scope_tape_prefix_and_dropout(name, expected):
    assert profile.classify(name, RULES) == expected


def test_group_ops_sums_parts_forward_and_backward_and_leaves_the_rest_outside():
    result = profile.group_ops(ROWS, RULES, step_ms=20.0, top=3)
    parts = {row["part"]: row for row in result["parts"]}
    assert [row["part"] for row in result["parts"]] == [
        "decoder self-attention",
        "decoder cross-attention",
        "postnet",
        "loss: mel L1",
        "update: clip",
        "update: AdamW",
        "other",
        "outside ops",
    ]  # in the step's order, parts without ops left out
    attention = parts["decoder self-attention"]
    assert (attention["forward_ms"], attention["backward_ms"]) == pytest.approx((5.0, 5.0))
    assert attention["kinds"] == pytest.approx({"attention": 8.0, "dropout": 2.0})
    assert parts["loss: mel L1"]["backward_ms"] == pytest.approx(0.25)
    assert result["op_ms"] == pytest.approx(18.0)
    assert parts["outside ops"]["ms"] == pytest.approx(2.0)
    assert sum(row["share"] for row in result["parts"]) == pytest.approx(1.0)
    assert result["op_types"][0] == {"type": "BatchMatMulV2", "ms": pytest.approx(8.0),
                                     "share": pytest.approx(0.4), "ops": 2}  # fmt: skip
    assert len(result["op_types"]) == len(result["top_ops"]) == 3
    assert result["top_ops"][0]["name"] == f"gradient_tape/{SELF}/MatMul/MatMul"
    assert {row["kind"] for row in result["kinds"]} == {"attention", "dropout", "conv", "loss",
                                                        "optimizer", "other"}  # fmt: skip


def test_outside_ops_is_never_negative_when_ops_overlap():
    result = profile.group_ops(ROWS, RULES, step_ms=10.0)
    assert result["parts"][-1] == {"part": "outside ops", "forward_ms": 0.0, "backward_ms": 0.0,
                                   "ms": 0.0, "share": 0.0, "kinds": {}}  # fmt: skip


def test_format_profile_table_lists_every_part():
    result = {"shape": [2, 8, 16], "compiler": "graph", "step_ms_unprofiled": 19.0,
              **profile.group_ops(ROWS, RULES, step_ms=20.0)}  # fmt: skip
    table = profile.format_profile_table(result)
    assert "batch 2 x text 8 x frames 16" in table
    for row in result["parts"]:
        assert row["part"] in table


def test_self_times_subtract_nested_ops_and_pass_names_down():
    matmul, call, fusion = ("a/MatMul", "MatMul"), ("rng/Uniform", "Uniform"), ("", "hlo fusion")
    add = ("b/Add", "Add")
    events = [
        (0, 10, "a/MatMul:MatMul", matmul),
        (2, 3, "MemoryAllocation", None),  # not an op: not subtracted
        (20, 10, "call.1", call),
        (21, 6, "fusion.2", fusion),  # no name: the call's
        (22, 2, "add.3", add),
        (40, 5, "a/MatMul:MatMul", matmul),
    ]
    assert sorted(profile._self_times(events)) == sorted([
        ("a/MatMul:MatMul", matmul, 10), ("call.1", call, 4), ("fusion.2", call, 4),
        ("add.3", add, 2), ("a/MatMul:MatMul", matmul, 5),
    ])  # fmt: skip


def test_read_op_times_takes_each_events_median_per_step(tmp_path):
    """Two steps of a thunk-like event under one op, and a small one beside it: the
    medians are of each event, so the small one does not pull the large one down."""
    space = xplane_pb2.XSpace()
    plane = space.planes.add(name="/host:CPU")
    names = {1: "a/MatMul:MatMul", 2: "a/MatMul:MatMul", 3: "b/Add:AddV2"}
    for key, name in names.items():
        plane.event_metadata[key].name = name
    line = plane.lines.add(name="tf_Compute")
    for start, duration, key in [(0, 10e6, 1), (20e6, 1e6, 3), (50e6, 30e6, 2), (90e6, 2e6, 3)]:
        line.events.add(metadata_id=key, offset_ps=int(start), duration_ps=int(duration))
    (tmp_path / "host.xplane.pb").write_bytes(space.SerializeToString())
    rows = sorted(profile.read_op_times(tmp_path, steps=2))
    assert rows == [("a/MatMul", "MatMul", pytest.approx(20.0)),
                    ("b/Add", "AddV2", pytest.approx(1.5))]  # fmt: skip


@pytest.mark.parametrize(("event", "expected"), [
    ("text_to_mel_1/dense/MatMul:_MklMatMul", ("text_to_mel_1/dense/MatMul", "_MklMatMul")),
    ("fusion.7", ("text_to_mel_1/postnet_1/conv", "Conv2D")),
    ("__inference_traced_12:__inference_traced_12", None),  # XLA's program, as one op
    ("StatefulPartitionedCall:StatefulPartitionedCall", None),
    ("ExecutorState::Process", None),
    ("EagerLocalExecute: __inference_f_41", None),
    ("train", None),
])  # fmt: skip
def test_op_events_are_the_executors_ops_and_known_thunks(event, expected):
    hlo = {"fusion.7": ("text_to_mel_1/postnet_1/conv", "Conv2D")}
    assert profile._op_of(event, hlo) == expected


@pytest.mark.parametrize(("raw", "expected"), [
    ("_MklNativeFusedConv2D", "FusedConv2D"), ("_MklBatchMatMulV2", "BatchMatMulV2"),
    ("_FusedMatMul", "FusedMatMul"), ("Softmax", "Softmax"),
])  # fmt: skip
def test_normalize_type_drops_onednn_prefixes(raw, expected):
    assert profile.normalize_type(raw) == expected


def test_model_rules_name_the_decoder_roles_of_a_real_model():
    config = load_stack_config(None, ["model.preset=tiny"]).model
    model = TextToMel(config)  # sublayers exist before the first call; no weights needed
    rules = profile.model_rules(model)
    block = model.decoder.blocks[0]
    scope = f"{model.name}_1/{model.decoder.name}_1/{block.name}_1"
    expected = {
        f"{scope}/{block.self_attn.name}_1/query/einsum/Einsum": ("decoder self-attention",
                                                                   "attention"),
        f"{scope}/{block.cross_attn.name}_1/softmax/Softmax": ("decoder cross-attention",
                                                               "attention"),
        f"{scope}/{block.cross_norm.name}_1/moments/mean": ("decoder cross-attention", "norm"),
        f"{scope}/{block.ff_out.name}_1/MatMul": ("decoder feed-forward", "feed-forward"),
        f"{scope}/{block.drop.name}_3/SelectV2": ("decoder residuals", "dropout"),
        f"{scope}/add_1": ("decoder residuals", "other"),
        f"{model.name}_1/{model.decoder.name}_1/{model.decoder.prenet[1].name}_1/MatMul": (
            "decoder prenet", "dense"),
        f"{model.name}_1/dropout_mask/StatelessRandomUniformFullIntV2": (
            "decoder prenet", "dropout"),
        f"{model.name}_1/{model.text_encoder.name}_1/{model.text_encoder.blocks[1].name}_1/"
        f"{model.text_encoder.blocks[1].ff_in.name}_1/MatMul": ("text encoder", "feed-forward"),
        f"{model.name}_1/{model.postnet.name}_1/{model.postnet.out.name}_1/convolution": (
            "postnet", "conv"),
        f"{model.name}_1/{model.stop_head.name}_1/MatMul": ("mel/stop heads", "dense"),
        f"{model.name}_1/strided_slice_8": ("model glue", "other"),
        "update/global_norm/L2Loss": ("update: global norm + gate", "optimizer"),
        "loss_guided_attention/Exp": ("loss: guided attention", "loss"),
    }  # fmt: skip
    for name, (part, kind) in expected.items():
        assert profile.classify(name, rules)[:2] == (part, kind), name


def test_the_loss_terms_trace_under_the_scopes_the_rules_name():
    graph = (
        tf.function(xtts_train.models.text_to_mel.losses.masked_l1)
        .get_concrete_function(
            tf.TensorSpec([1, 2, 3]), tf.TensorSpec([1, 2, 3]), tf.TensorSpec([1, 2])
        )
        .graph
    )
    names = [op.name for op in graph.get_operations() if op.type == "Abs"]
    assert names
    assert all(name.startswith("loss_mel_l1/") for name in names)


@pytest.mark.parametrize(("field", "value", "message"), [
    ("steps", 0, r"steps: expected an int >= 1, received: steps=0"),
    ("threads", True, r"threads: expected an int >= 1"),
    ("compiler", "auto", r"compiler: expected 'graph' or 'xla', received: compiler='auto'"),
    ("bucket", 1.5, r"bucket: expected an int"),
    ("preset", "huge", r"preset: expected one of"),
])  # fmt: skip
def test_settings_name_the_bad_value(field, value, message):
    with pytest.raises(SettingsError, match=message):
        ProfileBenchConfig(**{field: value})


def test_settings_want_an_existing_cache_folder(tmp_path):
    with pytest.raises(SettingsError, match=r"data: expected a feature cache folder"):
        ProfileBenchConfig(data=tmp_path / "missing")
    assert ProfileBenchConfig(data=tmp_path).train_bench().threads == 1
