"""Graphs Dynamo traced with symbolic sizes, compiled in versions: per concrete shape,
or for every value of one size with the others fixed.

nn functions take at most one dynamic size (`symbolic_sizes`). A graph of several
symbols (a batch and a sequence length under `dynamic=True`; a decode step, where
Dynamo gives every cache tensor's length a symbol of its own) is compiled by
`GeneralizingGraph`: each version re-traces the graph with one size symbolic, standing
for a group of the graph's symbols that are equal in the call, and every other symbol
fixed at its value. A call runs the first version whose fixed values and group match
it, so the sizes that change between calls are compiled once, as Dynamo's own
automatic dynamic shapes do for its graphs. `ShapeSpecializedGraph` compiles one
version per concrete shape.
"""

from __future__ import annotations

import copy
import logging
import operator
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import sympy
import torch
from torch.fx import GraphModule, Node
from torch.fx.node import map_arg

from fuseopt.diagnostics import ConfigurationError
from fuseopt.frontends.fx.errors import first_line

logger = logging.getLogger("fuseopt")

MAX_SPECIALIZATIONS = 64
"""How many concrete input signatures one symbolic-shape graph is compiled for."""


def has_symbolic_shapes(example_inputs: Sequence[Any]) -> bool:
    """Whether Dynamo traced the graph with symbolic sizes (dynamic=True, or its
    automatic dynamic shapes after a recompilation)."""
    for x in example_inputs:
        if isinstance(x, torch.SymInt | torch.SymFloat):
            return True
        if isinstance(x, torch.Tensor) and any(
            isinstance(d, torch.SymInt) for d in (*x.shape, *x.stride())
        ):
            return True
    return False


def inline_constant(node: Node, value: object) -> None:
    """Replace every use of `node` by `value` (a Python constant, or another node of
    the graph), then erase it."""

    def swap(arg: Node) -> object:
        return value if arg is node else arg

    for consumer in list(node.users):
        consumer.args = map_arg(consumer.args, swap)
        consumer.kwargs = map_arg(consumer.kwargs, swap)
    node.graph.erase_node(node)


class ShapeSpecializedGraph:
    """A Dynamo graph with symbolic sizes, compiled once per concrete input signature.

    nn types are static, so each new signature (tensor shapes, strides, dtypes, devices,
    requires_grad; integer inputs by value) is traced again by AOTAutograd with the
    real inputs as examples and compiled like a static graph. Scalars Dynamo passes as
    0-d tensors read with `.item()` (a module's float `eps`) are part of the signature
    by value and baked into the traced graph as constants. Dynamo's guards stay
    general; the specialization happens here, so `dynamic=True` compiles instead of
    running eagerly, and is never wrong. Past MAX_SPECIALIZATIONS signatures, new ones
    run the graph eagerly (logged once), so memory stays bounded.
    """

    def __init__(
        self,
        gm: GraphModule,
        compile_static: Callable[[GraphModule, Sequence[Any]], Callable[..., Any]],
    ):
        self.gm = gm
        self.compile_static = compile_static
        self.compiled: dict[tuple[Any, ...], Callable[..., Any]] = {}
        self.warned = False
        """Whether the warning that new shapes run eagerly was given."""
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        self.scalars = {
            i: [u for u in p.users]
            for i, p in enumerate(placeholders)
            if p.users and all(u.op == "call_method" and u.target == "item" for u in p.users)
        }

    def signature(self, args: Sequence[Any]) -> tuple[Any, ...]:
        """The cache key of a call's arguments."""
        return tuple(
            ("scalar", a.item())
            if i in self.scalars and isinstance(a, torch.Tensor) and a.dim() == 0
            else (tuple(a.shape), a.stride(), a.dtype, a.device, a.requires_grad)
            if isinstance(a, torch.Tensor)
            else (type(a), a)
            for i, a in enumerate(args)
        )

    def baked(self, args: Sequence[Any]) -> GraphModule:
        """A copy of the graph with each `.item()` of a scalar input replaced by its
        value in `args`."""
        if not self.scalars:
            return self.gm
        graph = copy.deepcopy(self.gm.graph)
        items = {n.name: n for n in graph.nodes if n.op == "call_method" and n.target == "item"}
        for i, users in self.scalars.items():
            value = args[i].item()
            for user in users:
                inline_constant(items[user.name], value)
        return GraphModule(self.gm, graph)

    def __call__(self, *args: Any) -> Any:
        """Run the specialization for these arguments (compiling it on first use)."""
        key = self.signature(args)
        fn = self.compiled.get(key)
        if fn is None:
            if self.compiled_count() >= MAX_SPECIALIZATIONS:
                if not self.warned:
                    self.warned = True
                    logger.warning(
                        "fuseopt: more than %d input shapes for one graph; new shapes "
                        "run eagerly in PyTorch",
                        MAX_SPECIALIZATIONS,
                    )
                return self.gm(*args)
            fn = self.compiled[key] = self._specialize(args)
        return fn(*args)

    def compiled_count(self) -> int:
        """How many compiles this graph holds (bounded by MAX_SPECIALIZATIONS)."""
        return len(self.compiled)

    def _specialize(self, args: Sequence[Any]) -> Callable[..., Any]:
        """The graph compiled for these arguments, or the graph itself (run eagerly,
        logged) when it cannot be re-traced: a wrapped float read with `.item()`, say."""
        try:
            return self.compile_static(self.baked(args), list(args))
        except ConfigurationError:
            raise
        except Exception as e:  # PyTorch's tracing errors are many types
            logger.warning(
                "fuseopt: a dynamic-shape graph could not be specialized (%s: %s); "
                "it runs eagerly in PyTorch for these input shapes",
                type(e).__name__,
                first_line(e),
            )
            return self.gm


SizeAt = tuple[int, int | None]
"""Where a call carries a symbol's value: (argument, dim), dim None for an int argument."""

Group = dict[sympy.Symbol, int]
"""Symbols that a version reads as one size `n`, each as `n` plus its offset (the
first symbol's offset is 0)."""


def traced_inputs(gm: GraphModule, example_inputs: Sequence[Any]) -> list[Any]:
    """The inputs of Dynamo graph `gm` as traced: its placeholders' example values, fake
    tensors of symbolic sizes (Dynamo hands the backend the real tensors), where each
    placeholder has one; `example_inputs` otherwise."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(example_inputs):
        return list(example_inputs)
    return [
        n.meta.get("example_value", x) for n, x in zip(placeholders, example_inputs, strict=True)
    ]


def symbol_positions(
    example_inputs: Sequence[Any], symbols: set[sympy.Symbol]
) -> dict[sympy.Symbol, SizeAt] | None:
    """Where each of `symbols` is read in a call: an int (or float) argument that is the
    symbol (Dynamo lifts the sizes it uses), else a tensor dim of that size. None when
    an integer symbol is neither (a symbol only in strides, say); a float symbol need
    not be there (the `.item()` of a scalar input, which `ShapeSpecializedGraph.baked`
    inlines)."""
    found: dict[sympy.Symbol, SizeAt] = {}
    for i, x in enumerate(example_inputs):
        if isinstance(x, torch.SymInt | torch.SymFloat) and x.node.expr in symbols:
            found.setdefault(x.node.expr, (i, None))
    for i, x in enumerate(example_inputs):
        if isinstance(x, torch.Tensor):
            for d, n in enumerate(x.shape):
                if isinstance(n, torch.SymInt) and n.node.expr in symbols:
                    found.setdefault(n.node.expr, (i, d))
    return found if all(s in found for s in symbols if s.is_integer) else None


def _read(args: Sequence[Any], at: SizeAt) -> int:
    i, d = at
    return args[i] if d is None else args[i].shape[d]


def generalized_inputs(
    example_inputs: Sequence[Any], group: Group, values: dict[sympy.Symbol, int]
) -> tuple[list[Any], sympy.Symbol, Any]:
    """Fake inputs for re-tracing a graph with one symbolic size `n`: each symbol of
    `group` becomes `n` plus its offset (`n`'s hint: the value in `values` of the
    group's first symbol), every other symbol its value. Returns the inputs, `n` and its
    ShapeEnv (whose guards tell whether the trace held for every size)."""
    from torch._dynamo.source import ConstantSource
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv

    env = ShapeEnv()
    mode = FakeTensorMode(shape_env=env)
    hint = values[next(iter(group))]
    symbol = env.create_symbol(hint, ConstantSource("fuseopt_size"), DimDynamic.DYNAMIC)
    subs = {s: symbol + group[s] if s in group else sympy.sympify(v) for s, v in values.items()}

    def size(n: object) -> object:
        if not isinstance(n, torch.SymInt):
            return n
        e = n.node.expr.xreplace(subs)
        if e.is_number:
            return int(e)
        return env.create_symintnode(e, hint=int(e.xreplace({symbol: hint})))

    inputs: list[Any] = []
    for x in example_inputs:
        if isinstance(x, torch.Tensor):
            with mode:
                t = torch.empty_strided(
                    [size(n) for n in x.shape],
                    [size(n) for n in x.stride()],
                    dtype=x.dtype,
                    device=x.device,
                )
            inputs.append(t.requires_grad_(x.requires_grad))
        else:
            inputs.append(size(x))
    return inputs, symbol, env


def sizes_inlined(
    gm: GraphModule, group: Group, values: dict[sympy.Symbol, int]
) -> tuple[GraphModule, set[int]]:
    """A copy of `gm` without the size placeholders of the symbols not in `group` (their
    values inlined) nor of `group`'s symbols past the first one read (that one plus the
    offset instead), and the positions of the placeholders removed. AOTAutograd makes
    every int input a symbol of its own again; inlined, the fixed sizes stay numbers."""
    graph = copy.deepcopy(gm.graph)
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    first: Node | None = None
    replaced: dict[int, object] = {}
    members = [
        (i, p, p.meta["example_value"].node.expr)
        for i, p in enumerate(placeholders)
        if isinstance(p.meta.get("example_value"), torch.SymInt | torch.SymFloat)
        and p.meta["example_value"].node.expr in values
    ]
    for i, p, symbol in members:
        if symbol not in group:
            replaced[i] = values[symbol]
        elif first is None:
            first, base = p, group[symbol]
        elif group[symbol] == base:
            replaced[i] = first
        else:
            with graph.inserting_after(placeholders[-1]):
                replaced[i] = graph.call_function(operator.add, (first, group[symbol] - base))
    for i, value in replaced.items():
        inline_constant(placeholders[i], value)
    return GraphModule(gm, graph), set(replaced)


def without_arguments(fn: Callable[..., Any], dropped: set[int]) -> Callable[..., Any]:
    """`fn` called with the arguments at positions `dropped` left out."""
    if not dropped:
        return fn

    def call(*args: Any) -> Any:
        return fn(*[a for i, a in enumerate(args) if i not in dropped])

    return call


class PinnedSize(Exception):
    """A version's trace pinned its size down (`_specialized`), found before anything
    was compiled for it (`stop_if_pinned`)."""


_PIN_CHECK: ContextVar[Callable[[], bool] | None] = ContextVar("fuseopt_pin_check", default=None)
"""While a version that would be dropped if pinned is traced: whether it is pinned."""


def stop_if_pinned() -> None:
    """Raise PinnedSize when the version being traced has pinned its size and would be
    dropped (a GeneralizingGraph with a partitioned fallback): the frontend's graph
    compiler calls this before it compiles a traced graph, so no kernel is compiled for
    a version that is not kept."""
    check = _PIN_CHECK.get()
    if check is not None and check():
        raise PinnedSize


def _specialized(env: Any, symbol: sympy.Symbol) -> bool:
    """Whether tracing pinned `symbol` down: replaced it by a number, narrowed its range
    or left a guard on it that is not true for every size from 2 up (`n != 8`, say)."""
    from torch.utils._sympy.numbers import int_oo
    from torch.utils._sympy.value_ranges import ValueRanges, bound_sympy

    replaced = env.replacements.get(symbol)
    if replaced is not None and replaced.is_number:
        return True
    bounds = env.var_to_range.get(symbol)
    if bounds is not None and (bounds.lower > 2 or bounds.upper < 2**31):
        return True
    every_size = {symbol: ValueRanges(2, int_oo)}
    for guard in env.guards:
        if symbol not in guard.expr.free_symbols:
            continue
        try:
            if bound_sympy(guard.expr, every_size).lower != sympy.true:
                return True
        except Exception:  # noqa: BLE001 - a guard sympy cannot bound: not provably true
            return True
    return False


@dataclass(frozen=True)
class SizeVersion:
    """A compiled version of a graph: `fn` holds for every call whose sizes at `group`
    are one value plus each one's offset and whose sizes at `fixed` (and scalar inputs,
    `scalars`) are the recorded values."""

    group: tuple[tuple[SizeAt, int], ...]
    fixed: tuple[tuple[SizeAt, int], ...]
    scalars: tuple[tuple[int, Any], ...]
    fn: Callable[..., Any]
    symbols: Group
    """The graph's symbols `group` reads, with their offsets."""

    def matches(self, args: Sequence[Any]) -> bool:
        """Whether this version computes the call on `args`."""
        for at, value in self.fixed:
            if _read(args, at) != value:
                return False
        return self.group_holds(args) and all(args[i].item() == v for i, v in self.scalars)

    def group_holds(self, args: Sequence[Any]) -> bool:
        """Whether the call's sizes at `group` are one value plus their offsets."""
        first = _read(args, self.group[0][0])
        return all(_read(args, at) == first + offset for at, offset in self.group[1:])


class GeneralizingGraph(ShapeSpecializedGraph):
    """A Dynamo graph of several symbolic sizes, compiled in versions of one dynamic size.

    The symbols that change between calls are the varying ones (all of them when Dynamo
    made them symbolic after seeing them change, or `mark_dynamic`; under
    `dynamic=True`, where Dynamo assumes every size dynamic, those seen to change). A
    call that no version matches compiles one: a set of varying symbols becomes one
    symbol at offsets (`_group`: those that changed together, or are equal or one
    apart in the call), the others are fixed at their values
    (`generalized_inputs`), and the graph is re-traced and compiled as a graph of one
    symbol (its kernels take that size at run time). A trace that pins the size down
    (`_specialized`), or a call with nothing varying, compiles for the call's shapes
    only (`ShapeSpecializedGraph`); or, given `partitioned` (a function compiling the
    graph once with its symbolic-size ops in PyTorch), runs that instead, compiled at
    its first use. Versions and shapes together are bounded by MAX_SPECIALIZATIONS.
    """

    def __init__(
        self,
        gm: GraphModule,
        compile_static: Callable[[GraphModule, Sequence[Any]], Callable[..., Any]],
        example_inputs: Sequence[Any],
        positions: dict[sympy.Symbol, SizeAt],
        all_varying: bool,
        partitioned: Callable[[], Callable[..., Any]] | None = None,
    ):
        super().__init__(gm, compile_static)
        self.partitioned = partitioned
        self.partition: Callable[..., Any] | None = None
        self.example_inputs = list(example_inputs)
        self.positions = positions
        self.symbols = sorted(positions, key=str)
        self.varying: set[sympy.Symbol] = set(self.symbols) if all_varying else set()
        self.versions: list[SizeVersion] = []
        self.tried: set[tuple[Any, ...]] = set()
        self.last: dict[sympy.Symbol, int] | None = None

    def __call__(self, *args: Any) -> Any:
        """Run the first version matching the call (compiling one on a miss)."""
        for version in self.versions:
            if version.matches(args):
                return version.fn(*args)
        if self.compiled:  # shapes compiled as they are (their signature is the key)
            fn = self.compiled.get(self.signature(args))
            if fn is not None:
                return fn(*args)
        values = {s: _read(args, self.positions[s]) for s in self.symbols}
        last, self.last = self.last or values, values
        changes = {s: values[s] - last[s] for s in self.symbols if values[s] != last[s]}
        self.varying |= set(changes)
        fn = self._generalize(args, values, changes)
        if fn is not None:
            return fn(*args)
        if self.partitioned is None:
            return super().__call__(*args)
        if self.partition is None:
            logger.info("fuseopt: compiled once, its symbolic-size ops run in PyTorch")
            self.partition = self.partitioned()
        return self.partition(*args)

    def _otherwise(self) -> str:
        """What runs where a version is not made (for the log)."""
        return "not a version" if self.partitioned else "compiled for these shapes"

    def compiled_count(self) -> int:
        """Shapes and versions together."""
        return len(self.compiled) + len(self.versions)

    def _group(
        self,
        args: Sequence[Any],
        values: dict[sympy.Symbol, int],
        changes: dict[sympy.Symbol, int],
    ) -> Group:
        """The symbols to read as one size: those of a version whose group the call fits
        (a batch that varies under another fixed sequence length), unless more symbols
        changed together than it reads as one; else the largest set
        of those that changed since the last call compiled by one amount (they grow
        together: a cache's length and its mask's), each at its offset from the
        smallest; without changes, the largest set of varying symbols of one value and
        the value after it (a KV cache's length and its mask's, which grow together: a
        guess that the next call corrects if it is wrong).
        Every value at least 2 (Dynamo specializes 0 and 1)."""
        for version in self.versions:
            if set(changes) > set(version.symbols):
                continue  # more sizes moved together than this version reads as one
            if all(values[s] >= 2 for s in version.symbols) and version.group_holds(args):
                return dict(version.symbols)
        classes: dict[int, list[sympy.Symbol]] = {}
        for s in self.symbols:
            if not s.is_integer or s not in self.varying or values[s] < 2:
                continue
            if not changes or s in changes:
                classes.setdefault(changes[s] if changes else values[s], []).append(s)
        if not changes:  # a value and the one after it: a cache's length, its mask's
            classes = {v: members + classes.get(v + 1, []) for v, members in classes.items()}
        members = max(classes.values(), key=len, default=[])
        if not members:
            return {}
        base = min(members, key=lambda s: (values[s], str(s)))
        return {s: values[s] - values[base] for s in sorted(members, key=lambda s: values[s])}

    def _generalize(
        self, args: Sequence[Any], values: dict[sympy.Symbol, int], changes: dict[sympy.Symbol, int]
    ) -> Callable[..., Any] | None:
        """A new version for this call, or None to compile for its shapes only."""
        group = self._group(args, values, changes)
        scalars = tuple((i, args[i].item()) for i in self.scalars)
        fixed = tuple((self.positions[s], values[s]) for s in self.symbols if s not in group)
        key = (tuple(group.items()), fixed, scalars)
        if not group or key in self.tried:
            return None
        if self.compiled_count() >= MAX_SPECIALIZATIONS:
            return None
        self.tried.add(key)  # tried once, whatever comes of it
        token = None
        try:
            inputs, symbol, env = generalized_inputs(self.example_inputs, group, values)
            graph, dropped = sizes_inlined(self.baked(args), group, values)
            if self.partitioned is not None:  # a pinned version is dropped: compile none
                token = _PIN_CHECK.set(lambda: _specialized(env, symbol))
            fn = without_arguments(
                self.compile_static(graph, [x for i, x in enumerate(inputs) if i not in dropped]),
                dropped,
            )
        except ConfigurationError:
            raise
        except PinnedSize:
            logger.info(
                "fuseopt: tracing pinned the size of %s down; not a version",
                ", ".join(map(str, group)),
            )
            return None
        except Exception as e:  # PyTorch's tracing errors are many types
            logger.info(
                "fuseopt: a version for every value of %s could not be traced (%s: %s); %s",
                ", ".join(map(str, group)),
                type(e).__name__,
                first_line(e),
                self._otherwise(),
            )
            return None
        finally:
            if token is not None:
                _PIN_CHECK.reset(token)
        if _specialized(env, symbol):
            logger.info(
                "fuseopt: tracing pinned the size of %s down; %s",
                ", ".join(map(str, group)),
                self._otherwise(),
            )
            if self.partitioned is not None:
                return None
            self.compiled[self.signature(args)] = fn
            return fn
        sizes = [f"{s} = n" + (f" + {o}" if o else "") for s, o in group.items()]
        sizes += [f"{s} = {values[s]}" for s in self.symbols if s not in group]
        logger.info("fuseopt: compiled a version for every n, with %s", ", ".join(sizes))
        reads = tuple((self.positions[s], offset) for s, offset in group.items())
        version = SizeVersion(reads, fixed, scalars, fn, group)
        self.versions.append(version)
        return fn
