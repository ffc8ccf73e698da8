"""PyTorch ops kept as calls (`nn.torch_call`, `tile.torch_call`,
`fuseopt.dialects.torch_call`): the call text, the verifiers, the reference interpreter
at both levels, the Triton backend, `fuseopt.export` of ops without an nn lowering and
`fuseopt.load_mlir` running exported text again (the CUDA host function is covered in
tests/test_cuda_emulated.py, the printed forms in filecheck/backends/torch-call.mlir)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

import fuseopt
from fuseopt.dialects import torch_call

EMBED = """
func.func @f(%w: tensor<16x4xf32>, %ids: tensor<2x3xi64>) -> (tensor<2x3x4xf32>, tensor<2x3x4xi64>) {
  %e = nn.torch_call "aten.embedding.default"(%w, %ids) {call = "{'args':[{'operand':0},{'operand':1}],'kwargs':{}}"} : (tensor<16x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
  %r = nn.relu %e : tensor<2x3x4xf32>
  %s, %i = nn.torch_call "aten.sort.default"(%r) {call = "{'args':[{'operand':0},-1,true],'kwargs':{}}"} : (tensor<2x3x4xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x4xi64>)
  func.return %s, %i : tensor<2x3x4xf32>, tensor<2x3x4xi64>
}
"""


def _inputs() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return torch.randn(16, 4, generator=g), torch.tensor([[1, 15, 0], [3, 3, 7]])


def _expected(w: torch.Tensor, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    values, indices = torch.sort(torch.relu(torch.nn.functional.embedding(ids, w)), -1, True)
    return values, indices


def test_call_text_round_trips_every_kind_of_value() -> None:
    args = [1, -2.5, math.inf, -math.inf, torch.bfloat16, torch.device("cpu"), [3, None], True]
    kwargs = {"layout": torch.strided, "mode": "tanh", "fmt": torch.contiguous_format}
    text = torch_call.encode(args, kwargs, lambda v: None)
    assert '"' not in text
    decoded_args, decoded_kwargs = torch_call.decode(text)
    assert decoded_args[0:2] == [1, -2.5] and decoded_args[6:] == [[3, None], True]
    assert decoded_args[2:5] == [{"float": "inf"}, {"float": "-inf"}, {"dtype": "bfloat16"}]
    assert decoded_kwargs["layout"] == {"layout": "strided"}
    source = torch_call.python_call("aten.f.default", text, [], "dev")
    expected = "float('inf'), float('-inf'), getattr(torch, 'bfloat16'), dev, [3, None], True"
    assert expected in source
    assert "layout=getattr(torch, 'strided')" in source
    assert "fmt=getattr(torch, 'contiguous_format')" in source
    with pytest.raises(torch_call.CallEncodingError, match="holding a quote"):
        torch_call.encode(["it's"], {}, lambda v: None)
    with pytest.raises(torch_call.CallEncodingError, match="type object"):
        torch_call.encode([object()], {}, lambda v: None)


@pytest.mark.parametrize(
    ("target", "call", "message"),
    [
        ("torch.relu", "{'args':[{'operand':0}],'kwargs':{}}", "must name an ATen op"),
        ("aten.relu.default", "{'args':[{'operand':1}],'kwargs':{}}", "refers to operands [1]"),
        ("aten.relu.default", "{'args':[],'kwargs':{}}", "refers to operands []"),
        ("aten.relu.default", '{"args":[],"kwargs":{}}', "single quotes"),
        ("aten.relu.default", "{'args':{},'kwargs':{}}", "args must be a list"),
        ("aten.relu.default", "[1, 2", "not JSON"),
        # text the printers write into Python source is checked: names and literals only
        (
            "aten.relu.default",
            "{'args':[{'operand':0}],'kwargs':{'dtype':{'dtype':'float32 if print(1) else 0'}}}",
            "is not a valid dtype",
        ),
        (
            "aten.relu.default",
            "{'args':[{'operand':0}],'kwargs':{'x=print(1),y':1}}",
            "must be identifiers",
        ),
        (
            "aten.relu.default",
            "{'args':[{'operand':0},{'float':'1e3'}],'kwargs':{}}",
            "valid float",
        ),
        (
            "aten.relu.default",
            "{'args':[{'operand':0},{'code':'x'}],'kwargs':{}}",
            "unknown reference",
        ),
    ],
)
def test_verifier_rejects_bad_calls_located(target: str, call: str, message: str) -> None:
    escaped = call.replace('"', '\\"')  # an MLIR string holding double quotes
    text = (
        "func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
        f'  %r = nn.torch_call "{target}"(%x) {{call = "{escaped}"}} : (tensor<4xf32>) -> tensor<4xf32>\n'
        "  func.return %r : tensor<4xf32>\n}\n"
    )
    with pytest.raises(fuseopt.CompileError) as e:
        fuseopt.parse(text, "calls.mlir")
    assert "calls.mlir:2:" in str(e.value) and message in str(e.value), str(e.value)


def test_interpreter_runs_calls_at_the_nn_and_the_tile_level() -> None:
    w, ids = _inputs()
    values, indices = _expected(w, ids)
    module = fuseopt.parse(EMBED)
    for level in ("nn", "tile"):
        if level == "tile":
            fuseopt.run_pipeline(module, "standard")
        got_values, got_indices = fuseopt.interpret(module, "f", w.numpy(), ids.numpy())
        np.testing.assert_array_equal(np.asarray(got_values), values.numpy())
        np.testing.assert_array_equal(np.asarray(got_indices), indices.numpy())


def test_triton_backend_calls_pytorch_between_kernels(tmp_path: Path) -> None:
    w, ids = _inputs()
    fn = fuseopt.load_mlir(EMBED, backend="triton", cache_dir=str(tmp_path))
    got_values, got_indices = fn(w, ids)
    values, indices = _expected(w, ids)
    assert torch.equal(got_values, values) and torch.equal(got_indices, indices)
    assert [k.name for k in fn.kernels][:1] == ["aten.embedding.default"]


def test_export_keeps_ops_without_a_lowering_as_calls_and_the_text_runs_again(
    tmp_path: Path,
) -> None:
    """roll and flip have no nn lowering: export writes them as calls (the embedding,
    cumsum and argmax beside them compile), the file goes through fuse-opt's standard
    pipeline, and load_mlir runs it."""

    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = torch.nn.Embedding(16, 8)

        def forward(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            h = torch.tanh(self.embed(ids)).cumsum(1).roll(1, 1).flip(2)
            return h * 2, h.argmax(-1)

    torch.manual_seed(0)
    model = Model().eval()
    ids = torch.tensor([[1, 2, 3, 15], [0, 0, 9, 4]])
    text = fuseopt.export(model, (ids,))
    targets = {line.split('"')[1] for line in text.splitlines() if "nn.torch_call" in line}
    assert targets == {"aten.flip.default", "aten.roll.default"}
    assert "nn.take" in text
    path = tmp_path / "model.mlir"
    path.write_text(text)
    lowered = fuseopt.run_pipeline(fuseopt.parse(text), "standard")
    assert "tile.torch_call" in str(lowered)
    with torch.no_grad():
        expected = model(ids)
    for backend in ("interpret", "triton"):
        fn = fuseopt.load_mlir(path, backend=backend)
        got = fn(model.embed.weight.detach(), ids)
        torch.testing.assert_close(got[0], expected[0], rtol=1e-5, atol=1e-5)
        assert torch.equal(got[1], expected[1])


def test_load_mlir_errors_are_clear(tmp_path: Path) -> None:
    with pytest.raises(fuseopt.CompileError, match="cannot read"):
        fuseopt.load_mlir(tmp_path / "missing.mlir")
    two = EMBED + EMBED.replace("@f(", "@g(")
    with pytest.raises(fuseopt.CompileError, match="name the one to load"):
        fuseopt.load_mlir(two, backend="interpret")
    with pytest.raises(fuseopt.CompileError, match="no function @h"):
        fuseopt.load_mlir(two, "h", backend="interpret")
    with pytest.raises(fuseopt.ConfigurationError, match="unknown backend"):
        fuseopt.load_mlir(EMBED, backend="nope")


def test_a_hugging_face_gpt2_exports_and_runs_from_text() -> None:
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(
        n_embd=32, n_head=4, n_layer=1, n_positions=64, vocab_size=64, bos_token_id=0,
        eos_token_id=0,
    )  # fmt: skip
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    gpt2 = transformers.GPT2Model(config).eval()

    class LastHidden(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.gpt2 = gpt2

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            return self.gpt2(input_ids=ids, use_cache=False).last_hidden_state

    model = LastHidden()
    ids = torch.randint(0, 64, (1, 8), generator=torch.Generator().manual_seed(1))
    text = fuseopt.export(model, (ids,))
    assert "nn.take" in text and "aten.embedding.default" not in text
    program = torch.export.export(model, (ids,))
    state = {**program.state_dict, **program.constants}
    args = [
        ids if s.kind.name == "USER_INPUT" else state[s.target]
        for s in program.graph_signature.input_specs
    ]
    with torch.no_grad():
        expected = model(ids)
    (got,) = fuseopt.load_mlir(text, backend="interpret")(*args)
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)
