"""The workspace plan of host-function temporaries (`backends/host_memory.py`): random
host functions (allocations, views, launches reading and writing them) never place two
temporaries that are alive at once in overlapping bytes, every offset is aligned, and
the workspace is no larger than one buffer per temporary."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from xdsl.dialects.builtin import Float32Type, IntegerType

from fuseopt.backends.host_memory import ALIGNMENT, plan_workspace
from fuseopt.dialects.tile_host import Alloc, HostFunction, Launch, View

ELEMENTS = [Float32Type(), IntegerType(8), IntegerType(64)]


class Value:
    """A stand-in SSA value (the plan only hashes them)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


@st.composite
def host_functions(draw: st.DrawFn) -> HostFunction:
    """Steps: allocate a temporary, view one, or launch over a few existing buffers."""
    steps: list[object] = []
    buffers: list[Value] = []
    for i in range(draw(st.integers(1, 30))):
        kind = draw(st.sampled_from(["alloc", "alloc", "view", "launch", "launch"]))
        if kind == "alloc" or not buffers:
            v = Value(f"t{i}")
            shape = (draw(st.integers(0, 300)),)
            steps.append(Alloc(v, shape, draw(st.sampled_from(ELEMENTS))))  # type: ignore[arg-type]
            buffers.append(v)
        elif kind == "view":
            v, source = Value(f"v{i}"), draw(st.sampled_from(buffers))
            steps.append(View(v, (1,), ELEMENTS[0], source=source))  # type: ignore[arg-type]
            buffers.append(v)
        else:
            args = draw(st.lists(st.sampled_from(buffers), min_size=1, max_size=4))
            steps.append(Launch("k", (1,), tuple(args)))  # type: ignore[arg-type]
    return HostFunction("main", (), tuple(steps))  # type: ignore[arg-type]


def _lifetimes(host: HostFunction) -> dict[object, tuple[int, int, int]]:
    """Each used temporary's (first step, last step, bytes), computed the plain way (a
    temporary no step uses gets no bytes)."""
    root: dict[object, object] = {}
    life: dict[object, list[int]] = {}
    size: dict[object, int] = {}
    used: set[object] = set()
    for i, step in enumerate(host.steps):
        if isinstance(step, Alloc):
            root[step.value] = step.value
            life[step.value] = [i, i]
            size[step.value] = max(1, step.shape[0]) * step.element.bitwidth // 8  # type: ignore[attr-defined]
        elif isinstance(step, View):
            root[step.value] = root[step.source]
            life[root[step.source]][1] = i
            used.add(root[step.source])
        else:
            for a in step.args:  # type: ignore[union-attr]
                life[root[a]][1] = i
                used.add(root[a])
    return {v: (a, b, size[v]) for v, (a, b) in life.items() if v in used}


@settings(max_examples=200, deadline=None)
@given(host_functions())
def test_live_temporaries_never_overlap(host: HostFunction) -> None:
    plan = plan_workspace(host)
    lives = _lifetimes(host)
    assert set(plan.offsets) == set(lives)
    assert plan.nbytes <= sum(-(-s // ALIGNMENT) * ALIGNMENT for _, _, s in lives.values())
    for v, (born, last, nbytes) in lives.items():
        start = plan.offsets[v]
        assert start % ALIGNMENT == 0 and start + nbytes <= plan.nbytes
        for w, (born_w, last_w, nbytes_w) in lives.items():
            if w is v:
                continue
            alive_together = born <= last_w and born_w <= last
            apart = start + nbytes <= plan.offsets[w] or plan.offsets[w] + nbytes_w <= start
            assert apart or not alive_together, (v, w, plan.offsets)


def test_a_dead_temporary_is_reused() -> None:
    """a dies at the second launch: c, allocated after it, takes offset 0."""
    a, b, c = Value("a"), Value("b"), Value("c")
    f32 = ELEMENTS[0]
    host = HostFunction(
        "main",
        (),
        (
            Alloc(a, (64,), f32),  # type: ignore[arg-type]
            Alloc(b, (64,), f32),  # type: ignore[arg-type]
            Launch("k", (1,), (a, b)),  # type: ignore[arg-type]
            Alloc(c, (64,), f32),  # type: ignore[arg-type]
            Launch("k", (1,), (b, c)),  # type: ignore[arg-type]
        ),
    )
    plan = plan_workspace(host)
    assert plan.offsets == {a: 0, b: 256, c: 0} and plan.nbytes == 512


def test_pointer_aliases_skip_views_only_kernels_read() -> None:
    """A view (or chain of views) read only by launches aliases its root buffer; a view
    a GEMM or PyTorch call reads keeps its tensor, and so does a view of it."""
    from fuseopt.backends.host_memory import pointer_aliases
    from fuseopt.dialects.tile_host import TorchCall

    a, v1, v2, v3, v4 = (Value(n) for n in ("a", "v1", "v2", "v3", "v4"))
    f32 = ELEMENTS[0]
    steps = [
        Alloc(a, (8,), f32),  # type: ignore[arg-type]
        View(v1, (2, 4), f32, source=a),  # type: ignore[arg-type]
        View(v2, (4, 2), f32, source=v1),  # type: ignore[arg-type]
        Launch("k", (1,), (v2,)),  # type: ignore[arg-type]
        View(v3, (8, 1), f32, source=a),  # type: ignore[arg-type]
        TorchCall("aten.relu.default", "{}", (v3,), ()),  # type: ignore[arg-type]
        View(v4, (1, 8), f32, source=v3),  # type: ignore[arg-type]
        Launch("k", (1,), (v4,)),  # type: ignore[arg-type]
    ]
    aliases = pointer_aliases(HostFunction("main", (), tuple(steps)))  # type: ignore[arg-type]
    assert aliases == {v1: a, v2: a, v4: v3}


def test_workspace_uses_place_views_of_temporaries_and_split_tensor_and_pointer_reads() -> None:
    """Views of a temporary live at its offset (plus theirs); a (read by launches, once
    through a view) needs no tensor; b is read by a PyTorch call, c at a launch position
    the backend reads as a tensor, the view of d by a GEMM (d itself only by a kernel),
    e by nothing."""
    from fuseopt.backends.host_memory import pointer_aliases, workspace_uses
    from fuseopt.dialects.tile_host import Gemm, TorchCall

    a, av, b, c, d, dv, e, w, out = (
        Value(n) for n in ("a", "av", "b", "c", "d", "dv", "e", "w", "out")
    )
    f32 = ELEMENTS[0]
    steps = [
        *(Alloc(v, (8,), f32) for v in (a, b, c, d, e)),  # type: ignore[arg-type]
        View(av, (2, 4), f32, source=a),  # type: ignore[arg-type]
        View(dv, (2, 2), f32, source=d, offset=4),  # type: ignore[arg-type]
        Launch("k", (1,), (a, b)),  # type: ignore[arg-type]
        Launch("k", (1,), (av, c)),  # type: ignore[arg-type]
        Launch("k", (1,), (d,)),  # type: ignore[arg-type]
        Gemm(None, dv, w, out, False, False),  # type: ignore[arg-type]
        TorchCall("aten.relu.default", "{}", (b,), ()),  # type: ignore[arg-type]
    ]
    host = HostFunction("main", (), tuple(steps))  # type: ignore[arg-type]
    plan = plan_workspace(host)
    aliases = pointer_aliases(host)

    def second_is_a_tensor(launch: Launch) -> set[int]:
        return {1} if launch.args[1:2] == (c,) else set()

    uses = workspace_uses(host, plan, aliases, second_is_a_tensor)
    assert uses.offsets[av] == plan.offsets[a] and uses.offsets[dv] == plan.offsets[d] + 16
    assert uses.tensors == {b, c, dv}
    assert uses.pointers == {a, av, b, d}
    assert workspace_uses(host, plan, aliases, lambda launch: set()).tensors == {b, dv}
