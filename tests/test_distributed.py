"""fuseopt under torch.distributed on CPU: gloo, two processes, a tiny Hugging Face Llama.

Three scenarios in one spawn of two ranks (`benchmarks.distributed.launch.spawn`, with
the benchmark's own parallelizations), each running four variants:
``torch.compile(backend="fuseopt")`` and ``fuseopt.compile``, each with the interpret
backend and the Triton backend (Triton's CPU interpreter), all with ``strict=True`` (a
backend failure raises instead of running the region eagerly):

- DDP training step (forward with labels, backward): every parameter's gradient equals
  eager DDP's on the same weights and batches. Each rank has its own batch and its own,
  un-reduced gradient differs from the reduced one, so a lost all-reduce would show.
- FSDP2 (``fully_shard`` on every decoder layer and the root): the same, each gradient
  gathered whole. (FSDP frees the unsharded parameters by resizing their storage, which
  fails on a storage NumPy once shared: the interpreter copies its inputs.)
- Tensor-parallel prefill (ColwiseParallel / RowwiseParallel on the attention and MLP
  projections): the logits equal the unsharded model's, eager.

Collectives: every ATen graph fuseopt partitions is logged (`GraphLog` wraps the
partitioner). Each collective in it (``_c10d_functional.all_reduce``, ``wait_tensor``,
...) must still be an op of the graph after partitioning, not inside a compiled region,
with its result read; under tensor parallelism every all-reduce sits between compiled
regions, and fuseopt.compile's records name each collective as run in PyTorch. Under
DDP and FSDP2 (Dynamo's defaults) the communication runs in DDP's reducer and FSDP's
hooks, outside the graphs; the reduced gradients are what shows that it ran.

A variant that fails in a rank fails its test with every rank's traceback; the variants
after it are then not run (their tests say so: the ranks may be out of step in their
collectives). The spawn takes about a minute on two idle cores, and stops with a failure
after `SPAWN_TIMEOUT_S`. Marked slow (``pytest -m "not slow"`` leaves it out); skipped
without torch.distributed's gloo backend or `transformers`.
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch

pytest.importorskip("transformers", reason="the Llama model needs transformers (the test extra)")

from benchmarks.distributed import build_llama  # noqa: E402
from benchmarks.distributed.launch import Rank, spawn, unavailable_reason  # noqa: E402
from benchmarks.distributed.parallel import (  # noqa: E402
    data_parallel,
    decoder_layers,
    full_gradient,
    fully_sharded,
    tensor_parallel,
)
from benchmarks.models.hf import LossOf, Prefill  # noqa: E402

_GLOO = unavailable_reason("cpu")
pytestmark = pytest.mark.skipif(_GLOO is not None, reason=f"no gloo process group: {_GLOO}")

WORLD_SIZE = 2
DIMS = {
    "hidden": 32,
    "intermediate": 64,
    "heads": 4,
    "kv_heads": 2,
    "layers": 1,
    "vocab": 64,
    "batch": 2,
    "seq": 8,
}
"""The tiny Llama (one layer, grouped-query attention: 2 query heads and 1 key-value head
per rank under tensor parallelism) and its batch."""

FRONTENDS = ("torch.compile", "fuseopt.compile")
BACKENDS = ("interpret", "triton")
VARIANTS = tuple(f"{frontend}:{backend}" for frontend in FRONTENDS for backend in BACKENDS)
"""Each scenario's compiled variants, ``FRONTEND:BACKEND``, in the order they run."""

GRADIENT_TOLERANCE = {"rtol": 1e-4, "atol": 1e-6}
LOGIT_TOLERANCE = {"rtol": 1e-4, "atol": 1e-5}
"""float32 tolerances: fuseopt rounds once per fused group (the interpreter computes in
float64), eager after every op; both differ from each other by a few ulps."""

SPAWN_TIMEOUT_S = 240.0
COLLECTIVE_TIMEOUT_S = 60.0
"""A hung scenario is stopped (and fails) after this long; a rank whose peer died fails
its collective after this long."""

ALL_REDUCE = "_c10d_functional.all_reduce.default"
WAIT = "_c10d_functional.wait_tensor.default"


# --------------------------------------------------------------- in the ranks


def _llama(training: bool) -> torch.nn.Module:
    """The same tiny Llama on every rank (seed 0), attention as plain ops."""
    return build_llama(DIMS, training, torch.float32, torch.device("cpu"), 0, attention="eager")


def _tokens(seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, DIMS["vocab"], (DIMS["batch"], DIMS["seq"]), generator=generator)


def _batch(where: Rank) -> tuple[torch.Tensor, torch.Tensor]:
    """This rank's own training batch (input ids, labels): the ranks' batches differ."""
    return _tokens(100 + where.rank), _tokens(200 + where.rank)


def _gradients(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: full_gradient(p) for name, p in model.named_parameters()}


Compile = Callable[[torch.nn.Module], Callable[..., Any]]


def _eager(module: torch.nn.Module) -> torch.nn.Module:
    return module


def _ddp_step(where: Rank, compile_fn: Compile) -> dict[str, torch.Tensor]:
    """Gradients of one DDP training step (the loss module under DDP, compiled whole)."""
    model = _llama(training=True)
    step = compile_fn(data_parallel(LossOf(model), where.device))
    step(*_batch(where)).backward()
    return _gradients(model)


def _fsdp_step(where: Rank, compile_fn: Compile) -> dict[str, torch.Tensor]:
    """Gradients (gathered whole) of one FSDP2 training step."""
    model = _llama(training=True)
    step = compile_fn(fully_sharded(LossOf(model), decoder_layers(model)))
    step(*_batch(where)).backward()
    return _gradients(model)


def _local_step(where: Rank) -> dict[str, torch.Tensor]:
    """Gradients of this rank's batch alone (what a lost all-reduce would leave)."""
    model = _llama(training=True)
    LossOf(model)(*_batch(where)).backward()
    return _gradients(model)


def _tp_prefill(where: Rank, compile_fn: Compile) -> dict[str, torch.Tensor]:
    """Logits of a tensor-parallel prefill (the same prompt on every rank)."""
    model = _llama(training=False)
    tensor_parallel(decoder_layers(model), where.device, where.world_size)
    with torch.no_grad():
        return {"logits": compile_fn(Prefill(model, decoder=True))(_tokens(7))}


def _unsharded_prefill(where: Rank) -> dict[str, torch.Tensor]:
    """Logits of the same prefill on the whole model, eager, in this rank alone."""
    with torch.no_grad():
        return {"logits": Prefill(_llama(training=False), decoder=True)(_tokens(7))}


SCENARIOS: dict[str, Callable[[Rank, Compile], dict[str, torch.Tensor]]] = {
    "tp": _tp_prefill,
    "ddp": _ddp_step,
    "fsdp": _fsdp_step,
}
"""Each scenario's ``run(where, compile_fn)`` (eager with the identity), in run order."""


def _collectives(gm: torch.fx.GraphModule) -> list[tuple[str, str]]:
    """(node, target) of every top-level collective op of `gm`, in graph order."""
    from fuseopt.frontends.fx.partition import is_collective

    return [
        (n.name, str(n.target))
        for n in gm.graph.nodes
        if n.op == "call_function" and is_collective(n.target)
    ]


def _sequence(gm: torch.fx.GraphModule) -> list[str]:
    """The partitioned graph in order: ``region`` per compiled region, and collectives."""
    from fuseopt.frontends.fx.partition import CompiledRegion, is_collective

    order = []
    for node in gm.graph.nodes:
        if node.op == "call_function" and isinstance(node.target, CompiledRegion):
            order.append("region")
        elif node.op == "call_function" and is_collective(node.target):
            order.append(str(node.target))
    return order


class GraphLog:
    """Every ATen graph fuseopt partitions, before and after: installed in a rank by
    wrapping the partitioner the Dynamo backend calls (`compile_graph_module`)."""

    def __init__(self) -> None:
        from fuseopt.frontends.fx import dynamo_backend

        self.graphs: list[dict[str, Any]] = []
        partition = dynamo_backend.compile_graph_module

        def logged(gm: torch.fx.GraphModule, name: str, *args: Any, **kwargs: Any) -> Any:
            received = _collectives(gm)
            out = partition(gm, name, *args, **kwargs)
            kept = _collectives(out)
            by_name = {n.name: n for n in out.graph.nodes}
            self.graphs.append(
                {
                    "name": name,
                    "received": received,
                    "kept": kept,
                    "unread": [node for node, _ in kept if not by_name[node].users],
                    "sequence": _sequence(out),
                }
            )
            return out

        dynamo_backend.compile_graph_module = logged

    def take(self) -> list[dict[str, Any]]:
        """The graphs logged since the last call."""
        graphs, self.graphs = self.graphs, []
        return graphs


def _compiler(variant: str, compiled: list[Any]) -> Compile:
    """``FRONTEND:BACKEND`` as a compile function (each result appended to `compiled`)."""
    import fuseopt

    frontend, backend = variant.split(":")

    def compile_fn(module: torch.nn.Module) -> Callable[..., Any]:
        torch._dynamo.reset()
        if frontend == "torch.compile":
            options = {"backend": backend, "strict": True}
            result = torch.compile(module, backend="fuseopt", options=options)
        else:
            result = fuseopt.compile(module, backend=backend, strict=True)
        compiled.append(result)
        return result

    return compile_fn


def _records(compiled: Any) -> dict[str, Any]:
    """What fuseopt.compile recorded (nothing for torch.compile's module)."""
    if not hasattr(compiled, "record"):
        return {}
    return {
        "fallbacks": [(f.target, f.reason) for f in compiled.fallbacks],
        "regions": len(compiled.regions),
        "kernels": len(compiled.kernels),
    }


def _run_variant(where: Rank, scenario: str, variant: str, log: GraphLog) -> dict[str, Any]:
    compiled: list[Any] = []
    values = SCENARIOS[scenario](where, _compiler(variant, compiled))
    return {"values": values, "graphs": log.take(), **_records(compiled[0])}


def run_all(where: Rank) -> dict[str, Any]:
    """One rank of every scenario: the runs without communication, then per scenario
    the eager run and every variant. A failing variant is recorded with its traceback
    and ends the run (the ranks may be out of step in their collectives)."""
    torch.set_num_threads(1)
    log = GraphLog()
    result: dict[str, Any] = {
        "unreduced": _local_step(where),
        "unsharded": _unsharded_prefill(where),
        "failed": None,
    }
    for scenario, run in SCENARIOS.items():
        variants: dict[str, Any] = {}
        result[scenario] = {"eager": run(where, _eager), "variants": variants}
        for variant in VARIANTS:
            try:
                variants[variant] = _run_variant(where, scenario, variant, log)
            except Exception:
                variants[variant] = {"error": traceback.format_exc()}
                result["failed"] = f"{scenario} {variant}"
                return result
    return result


# --------------------------------------------------------------- in pytest


def test_interpreter_leaves_input_storage_resizable() -> None:
    """FSDP2 frees a layer's unsharded parameters after its forward by resizing their
    storage to 0; Tensor.numpy() marks a storage never resizable again, so the
    interpreter must read copies of its inputs, not the caller's tensors."""
    import fuseopt

    weight = torch.randn(4, 4)
    compiled = fuseopt.compile(lambda x, w: torch.relu(x @ w), backend="interpret", strict=True)
    compiled(torch.randn(2, 4), weight)
    assert compiled.kernels
    weight.untyped_storage().resize_(0)


@pytest.fixture(scope="module")
def fresh_kernel_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """An empty fuseopt kernel cache for the spawned ranks (they inherit the environment)."""
    previous = os.environ.get("FUSEOPT_CACHE_DIR")
    os.environ["FUSEOPT_CACHE_DIR"] = str(tmp_path_factory.mktemp("fuseopt-cache"))
    yield
    if previous is None:
        os.environ.pop("FUSEOPT_CACHE_DIR", None)
    else:
        os.environ["FUSEOPT_CACHE_DIR"] = previous


@pytest.fixture(scope="module")
def ranks(fresh_kernel_cache: None) -> list[dict[str, Any]]:
    """Every rank's results of every scenario (one spawn of `WORLD_SIZE` processes)."""
    return spawn(
        run_all,
        WORLD_SIZE,
        timeout_s=SPAWN_TIMEOUT_S,
        collective_timeout_s=COLLECTIVE_TIMEOUT_S,
    )


def _scenario(ranked: dict[str, Any], scenario: str, rank: int) -> dict[str, Any]:
    """One rank's results of one scenario (a failure if an earlier variant stopped it)."""
    if scenario not in ranked:
        pytest.fail(f"rank {rank}: not run: {ranked['failed']} failed before it", pytrace=False)
    return ranked[scenario]


def _variant(ranks: list[dict[str, Any]], scenario: str, variant: str) -> list[dict[str, Any]]:
    """One variant's results in every rank; a failure carrying every rank's traceback
    (or why it did not run) when one rank did not complete it."""
    results = [_scenario(r, scenario, i)["variants"].get(variant) for i, r in enumerate(ranks)]
    if all(r is not None and "error" not in r for r in results):
        return results
    reports = [
        f"rank {i}: not run: {ranks[i]['failed']} failed before it"
        if r is None
        else f"rank {i}: raised:\n{r['error']}"
        if "error" in r
        else f"rank {i}: completed"
        for i, r in enumerate(results)
    ]
    pytest.fail(f"{scenario} {variant}:\n" + "\n".join(reports), pytrace=False)


def _assert_close(got: dict, want: dict, tolerance: dict, what: str) -> None:
    assert got.keys() == want.keys()
    for name, value in want.items():
        torch.testing.assert_close(
            got[name], value, **tolerance, msg=lambda m, name=name: f"{what} {name}: {m}"
        )


def _assert_differs(got: dict, other: dict, tolerance: dict, what: str) -> None:
    """Every value of `got` differs from `other`'s beyond `tolerance` (so a check that
    they are close to a third run can tell the two apart)."""
    for name, value in got.items():
        assert not torch.allclose(value, other[name], **tolerance), f"{what}: {name}"


def _assert_collectives_kept(result: dict[str, Any]) -> None:
    """Each collective fuseopt received is still a top-level op after partitioning (never
    in a compiled region, never dropped) and its result is read."""
    for graph in result["graphs"]:
        assert graph["kept"] == graph["received"], graph["name"]
        assert not graph["unread"], graph["name"]


def _assert_between_regions(result: dict[str, Any]) -> None:
    """Every all-reduce runs after a compiled region and before another."""
    for graph in result["graphs"]:
        order = graph["sequence"]
        for i, op in enumerate(order):
            if op == ALL_REDUCE:
                assert "region" in order[:i] and "region" in order[i + 1 :], (graph["name"], order)


def _received(result: dict[str, Any], target: str) -> int:
    return sum(t == target for g in result["graphs"] for _, t in g["received"])


def _assert_compiled(result: dict[str, Any]) -> None:
    """Something was compiled (a variant that ran all in PyTorch would prove nothing)."""
    assert sum(g["sequence"].count("region") for g in result["graphs"]) > 0
    if "kernels" in result:
        assert result["regions"] > 0 and result["kernels"] > 0


def _check_training(ranks: list[dict[str, Any]], scenario: str, variant: str) -> None:
    """Every parameter's gradient as eager's (same parallelism), in every rank."""
    for ranked, result in zip(ranks, _variant(ranks, scenario, variant), strict=True):
        _assert_close(result["values"], ranked[scenario]["eager"], GRADIENT_TOLERANCE, "gradient")
        _assert_collectives_kept(result)
        _assert_compiled(result)


@pytest.mark.slow
@pytest.mark.parametrize("variant", VARIANTS)
def test_ddp_training_step_gradients(ranks: list[dict[str, Any]], variant: str) -> None:
    _check_training(ranks, "ddp", variant)


@pytest.mark.slow
@pytest.mark.parametrize("variant", VARIANTS)
def test_fsdp2_training_step_gradients(ranks: list[dict[str, Any]], variant: str) -> None:
    _check_training(ranks, "fsdp", variant)


@pytest.mark.slow
@pytest.mark.parametrize("scenario", ["ddp", "fsdp"])
def test_reduced_gradients_differ_from_each_ranks_own(
    ranks: list[dict[str, Any]], scenario: str
) -> None:
    """The eager reference is the reduced gradient: every parameter's differs from the
    rank's own, so a step that lost the reduction fails the gradient tests."""
    for rank, ranked in enumerate(ranks):
        eager = _scenario(ranked, scenario, rank)["eager"]
        _assert_differs(eager, ranked["unreduced"], GRADIENT_TOLERANCE, scenario)


@pytest.mark.slow
def test_tensor_parallel_eager_matches_unsharded(ranks: list[dict[str, Any]]) -> None:
    """The plan itself is right: eager tensor parallelism gives the whole model's logits."""
    for rank, ranked in enumerate(ranks):
        eager = _scenario(ranked, "tp", rank)["eager"]
        _assert_close(eager, ranked["unsharded"], LOGIT_TOLERANCE, "eager TP")


@pytest.mark.slow
@pytest.mark.parametrize("variant", VARIANTS)
def test_tensor_parallel_prefill(ranks: list[dict[str, Any]], variant: str) -> None:
    """Logits as the unsharded model's; each layer's two all-reduces (attention, MLP) and
    their waits reach fuseopt, stay ops between compiled regions and are named as run in
    PyTorch in fuseopt.compile's records."""
    from fuseopt.frontends.fx.partition import COLLECTIVE_REASON

    for ranked, result in zip(ranks, _variant(ranks, "tp", variant), strict=True):
        _assert_close(result["values"], ranked["unsharded"], LOGIT_TOLERANCE, "TP")
        _assert_compiled(result)
        _assert_collectives_kept(result)
        _assert_between_regions(result)
        assert _received(result, ALL_REDUCE) == _received(result, WAIT) == 2 * DIMS["layers"]
        if "fallbacks" in result:
            named = [t for t, reason in result["fallbacks"] if reason == COLLECTIVE_REASON]
            received = [t for g in result["graphs"] for _, t in g["received"]]
            assert sorted(named) == sorted(received)
