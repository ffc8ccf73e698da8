"""mode="reduce-overhead" over a whole ATen graph (`frontends/fx/whole_graph.py`), on the
CPU: which graphs are replayed whole, the wiring through the Dynamo backend, and the
nesting rule of `CudaGraphFunction(encloses=True)` (regions run plainly inside it, and
replay their own graphs when its capture failed). The recording and replaying
themselves are checked on the GPU (test_whole_graph_gpu.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx import symbolic_trace

import fuseopt
from fuseopt.backends import cuda_graphs
from fuseopt.backends.cuda_graphs import CudaGraphFunction
from fuseopt.frontends.fx import whole_graph
from fuseopt.frontends.fx.packed_parameters import PackedParameters
from fuseopt.frontends.fx.whole_graph import WholeGraph, whole_graph_refusal


def _cuda_fakes(*shapes: tuple[int, ...]) -> list[torch.Tensor]:
    with FakeTensorMode(allow_non_fake_inputs=True):
        return [torch.empty(s, device="cuda") for s in shapes]


def _graph(fn: object) -> torch.fx.GraphModule:
    return symbolic_trace(fn)  # type: ignore[arg-type]


def test_a_graph_of_cuda_tensors_without_writes_is_replayed_whole() -> None:
    gm = _graph(lambda x, w: torch.relu(x @ w) + 1)
    assert whole_graph_refusal(gm, _cuda_fakes((4, 8), (8, 8)), {}) is None


@pytest.mark.parametrize(
    "inputs,words",
    [
        (lambda: [torch.zeros(4, 8), torch.zeros(8, 8)], "tensors are on cpu"),
        (lambda: [*_cuda_fakes((4, 8)), 3], "an input is a int"),
        (lambda: [], "no inputs"),
    ],
    ids=["cpu", "scalar", "none"],
)
def test_inputs_a_graph_cannot_replay_whole(inputs: object, words: str) -> None:
    gm = _graph(lambda x, w: torch.relu(x @ w) + 1)
    assert words in (whole_graph_refusal(gm, inputs(), {}) or "")  # type: ignore[operator]


def test_a_graph_writing_in_place_or_running_a_host_step_is_not_replayed_whole() -> None:
    """An input written in place would be written in the graph's copy of it; a host step
    (packed parameters) would not run at a replay: allowed only over the graph's own
    inputs, whose addresses a replay checks."""
    aten = torch.ops.aten
    gm = _graph(lambda x, w: torch.relu(x @ w) + 1)
    relu = next(n for n in gm.graph.nodes if n.op == "call_function" and n.target is torch.relu)
    relu.target = aten.relu_.default
    gm.recompile()
    assert "writes in place" in (whole_graph_refusal(gm, _cuda_fakes((4, 8), (8, 8)), {}) or "")

    relu.target = PackedParameters("packed")  # over the matmul's result
    gm.recompile()
    words = whole_graph_refusal(gm, _cuda_fakes((4, 8), (8, 8)), {}) or ""
    assert "host step over values the graph computes" in words

    x, w = (n for n in gm.graph.nodes if n.op == "placeholder")
    relu.args = (w, w)  # over inputs: packed once, then a view the replay reads in place
    gm.recompile()
    assert whole_graph_refusal(gm, _cuda_fakes((4, 8), (8, 8)), {}) is None


@pytest.mark.parametrize(
    ("device", "shape", "words"),
    [
        ("cuda:1", (4, 8), "its tensors are on cuda:0, cuda:1"),
        ("cpu", (4, 8), "its tensors are on cpu, cuda:0"),
        ("cpu", (), None),  # a number beside the results (an attention's RNG seed)
    ],
    ids=str,
)
def test_values_on_another_device_are_not_replayed_whole(
    device: str, shape: tuple[int, ...], words: str | None
) -> None:
    """Kernels on a second GPU would not be captured, and CPU work would run once, at
    the recording: every value but 0-d CPU numbers must be on the inputs' one device."""
    gm = _graph(lambda x, w: torch.relu(x @ w) + 1)
    relu = next(n for n in gm.graph.nodes if n.op == "call_function" and n.target is torch.relu)
    with FakeTensorMode(allow_non_fake_inputs=True):
        relu.meta["val"] = (torch.empty(4, 8, device="cuda"), torch.empty(shape, device=device))
    assert whole_graph_refusal(gm, _cuda_fakes((4, 8), (8, 8)), {}) == words


def test_a_graph_reading_an_input_by_strides_is_not_replayed_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`as_strided` of an offset input reads its storage: a graph reading the graph's
    copy of the input (another storage) would read other elements."""
    _as_if_on_cuda(monkeypatch)

    def program(x: torch.Tensor) -> torch.Tensor:
        return (x.as_strided((4,), (1,), 1) * 2).sin() + 1

    x = torch.arange(10.0)[1:]
    with torch.no_grad():
        compiled = fuseopt.compile(program, x, backend="triton", mode="reduce-overhead")
        torch.testing.assert_close(compiled(x), program(x))
    assert not compiled.record.whole_graphs


def test_a_graph_of_one_launch_runs_it_directly() -> None:
    """One kernel: a replay costs more host time than the launch (views are free)."""
    gm = _graph(lambda x: torch.relu(x).t().reshape(-1))
    assert whole_graph_refusal(gm, _cuda_fakes((4, 8)), {}) == "one launch"


def test_the_whole_graph_host_function_refuses_outputs_that_are_not_tensors() -> None:
    whole = WholeGraph(lambda x: (x, 3), "g")
    with pytest.raises(RuntimeError, match="not a tensor"):
        whole.host(False)(torch.zeros(2), device=torch.device("cpu"))
    x = torch.zeros(2)
    assert whole.check([x]) == (x,)


def _as_if_on_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    """Compile as if the inputs were CUDA tensors (the graphs run plainly on the CPU)."""
    original = whole_graph.whole_graph_refusal

    def refusal(gm: torch.fx.GraphModule, inputs: object, kernels: object) -> str | None:
        return original(gm, inputs, kernels, device_type="cpu")  # type: ignore[arg-type]

    monkeypatch.setattr(whole_graph, "whole_graph_refusal", refusal)


def test_linears_of_one_input_stay_apart_under_the_graph_modes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Merged linear layers pack their weights at run time (a host step a replay would
    skip): under the graph modes they are not merged by default, so the graph replays
    whole."""
    _as_if_on_cuda(monkeypatch)

    class TwoHeads(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.q, self.k = torch.nn.Linear(8, 8), torch.nn.Linear(8, 8)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = torch.relu(self.q(x)) * self.k(x)
            return torch.sort(y, dim=-1).values + 1  # sort: run in PyTorch (two launches)

    model, x = TwoHeads(), torch.randn(4, 8)
    with torch.no_grad():
        for mode in ("reduce-overhead", "max-autotune"):
            torch._dynamo.reset()
            compiled = fuseopt.compile(model, x, backend="triton", mode=mode)
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-4)
            assert compiled.record.whole_graphs, mode
        torch._dynamo.reset()  # merged on request: the packing reads inputs, still whole
        compiled = fuseopt.compile(
            model, x, backend="triton", mode="reduce-overhead", merge_linears=True
        )
        for _ in range(3):
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-4)
        (whole,) = compiled.record.whole_graphs.values()
        assert len(whole.fn.packed_inputs) == 4  # both weights and both biases
        assert model.q.weight.untyped_storage().data_ptr() == (
            model.k.weight.untyped_storage().data_ptr()
        ), "the weights were not packed into one buffer"


@pytest.mark.parametrize("mode", ["reduce-overhead", "max-autotune", None])
def test_inference_graphs_are_replayed_whole_under_the_graph_modes(
    monkeypatch: pytest.MonkeyPatch, mode: str | None
) -> None:
    """Under reduce-overhead and max-autotune an inference graph (a PyTorch op between
    two compiled regions) is one CUDA-graph function enclosing its regions' own; the
    default mode keeps none; results are eager's."""
    _as_if_on_cuda(monkeypatch)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))

    def program(x: torch.Tensor) -> torch.Tensor:
        h = model(x)
        return torch.sort(h, dim=-1).values * 2 + 1  # sort: run in PyTorch

    x = torch.randn(5, 8)
    with torch.no_grad():
        compiled = fuseopt.compile(program, x, backend="triton", mode=mode)
        for _ in range(3):
            torch.testing.assert_close(compiled(x), program(x), rtol=1e-4, atol=1e-4)
    wholes = compiled.record.whole_graphs
    if mode is None:
        assert not wholes
        return
    (whole,) = wholes.values()
    assert isinstance(whole, CudaGraphFunction) and whole.encloses
    assert isinstance(whole.fn, WholeGraph)
    assert len(compiled.regions) == 2 and any("sort" in f.target for f in compiled.fallbacks)


def test_a_training_graph_keeps_a_graph_per_region(monkeypatch: pytest.MonkeyPatch) -> None:
    _as_if_on_cuda(monkeypatch)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))
    x = torch.randn(5, 8)
    compiled = fuseopt.compile(model, x, backend="triton", mode="reduce-overhead")
    compiled(x).sum().backward()
    assert not compiled.record.whole_graphs


class _FakeCuda:
    """A tensor as CudaGraphFunction's bookkeeping sees it (device and address)."""

    device = SimpleNamespace(type="cuda")

    def __init__(self, address: int):
        self.address = address

    def data_ptr(self) -> int:
        return self.address


class _Counting:
    """A compiled function: counts its plain runs, checks nothing."""

    inputs = ()

    def __init__(self, inner: object = None):
        self.inner, self.runs = inner, 0

    def check(self, inputs: object) -> tuple:
        return tuple(inputs)  # type: ignore[arg-type]

    def __call__(self, *xs: object) -> tuple:
        self.runs += 1
        return self.inner(*xs) if self.inner is not None else xs  # type: ignore[operator]

    def host(self, interpret: bool) -> object:  # noqa: ARG002
        return lambda *xs, device: self(*xs)  # noqa: ARG005


def test_regions_decide_for_themselves_once_the_enclosing_function_has_recorded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """After the whole graph's first recording, a plain run (its replays' results still
    held by the caller) lets the regions replay graphs of their own."""
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    region = CudaGraphFunction(_Counting())
    whole = CudaGraphFunction(_Counting(region), encloses=True, instances=1)
    held = SimpleNamespace(pinned=((0, 100),), matches=lambda p: True, free=lambda: False)

    def record(self: CudaGraphFunction, xs: object, stable: object) -> object:
        assert self.encloses, "the region recorded while the whole graph ran"
        with cuda_graphs._enclosing():
            self.fn(*xs)
        return held

    monkeypatch.setattr(CudaGraphFunction, "_record", record)
    monkeypatch.setattr(
        cuda_graphs.GraphInstance, "replay", lambda self, xs: ()
    )  # not reached: `held` is never free
    x = _FakeCuda(100)
    whole(x)  # plain, the region plain inside it
    assert not region.book.previous
    monkeypatch.setattr(held, "replay", lambda xs: (), raising=False)
    whole(x)  # records (the region still plain inside), then replays the record
    assert not region.book.previous
    whole(x)  # its one instance is held: plain, and the region sees its inputs
    assert region.book.previous


def test_regions_run_plainly_inside_an_enclosing_function_and_graph_their_own_after_it_broke(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A region's graph function records nothing while the whole graph runs plainly or
    records; once the whole graph's capture failed, the region records its own."""
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    region = CudaGraphFunction(_Counting())
    recorded: list[object] = []

    def record_region(self: CudaGraphFunction, xs: object, stable: object) -> None:
        recorded.append(self)
        return None  # as a failed capture: plain launches

    whole = CudaGraphFunction(_Counting(region), encloses=True)
    attempts: list[bool] = []

    def record_whole(self: CudaGraphFunction, xs: object, stable: object) -> None:
        with cuda_graphs._enclosing():
            attempts.append(cuda_graphs._enclosed())
            self.fn(*xs)  # the warm-up and capture run the regions
        self.broken = True
        return None

    def record(self: CudaGraphFunction, xs: object, stable: object) -> None:
        return (record_whole if self.encloses else record_region)(self, xs, stable)

    monkeypatch.setattr(CudaGraphFunction, "_record", record)
    x = _FakeCuda(100)
    whole(x)  # first sight: plain, the region plain inside it
    assert region.fn.runs == 1 and not region.book.previous  # the region saw nothing
    whole(x)  # second: the whole graph records (and fails here), then runs plainly
    assert attempts == [True] and not recorded
    assert region.fn.runs == 3 and region.book.previous  # that plain run was its first sight
    whole(x)  # its second: it records
    assert recorded == [region]


def test_as_strided_of_a_value_the_graph_computes_replays_whole() -> None:
    """Only an input's storage differs in the graph's copy: `as_strided` of a value the
    graph computes reads the graph's own memory at every replay."""
    gm = _graph(lambda x, w: torch.relu(x @ w) + 1)
    relu = next(n for n in gm.graph.nodes if n.op == "call_function" and n.target is torch.relu)
    with gm.graph.inserting_after(relu):
        strided = gm.graph.call_function(torch.ops.aten.as_strided.default, (relu, (4,), (1,), 1))
    assert whole_graph_refusal(gm, _cuda_fakes((4, 8), (8, 8)), {}) is None
    x = next(n for n in gm.graph.nodes if n.op == "placeholder")
    with gm.graph.inserting_after(strided):
        view = gm.graph.call_function(torch.ops.aten.view.default, (x, (32,)))
        gm.graph.call_function(torch.ops.aten.as_strided.default, (view, (4,), (1,), 1))
    assert "by strides" in (whole_graph_refusal(gm, _cuda_fakes((4, 8), (8, 8)), {}) or "")
