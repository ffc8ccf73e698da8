"""The matmul K loop with its operands in registers (`operand_staging = "registers"`).

tile-promote records "registers" when not even one stage of the operand tiles (with
the epilogue's accumulator arrays) fits its shared-memory budget. Then the K loop (as
`pipeline.match_k_loop` matches it, any 2-D dots with an f32 accumulator) takes no
shared memory at all:

1. each accumulator is a dist register tile (f32), so the epilogue runs in registers
   too, with no shared-memory round trip;
2. for every k of the tile, each thread reads, for each of its accumulator chunks (v
   consecutive columns of one row), the chunk row's A element and the v B elements
   straight from global memory (L1 and L2 serve the reuse between threads) and
   accumulates the products in f32;
3. an element outside its buffer reads its load's fill value, so a ragged edge stays
   exactly masked, whatever the alignment.

No tensor cores: this is the form for tiles nothing else fits, not a fast path.
"""

from __future__ import annotations

from xdsl.dialects import scf
from xdsl.dialects.builtin import TensorType, f32

from fuseopt.backends.cuda import op_table
from fuseopt.backends.cuda.values import Buffer, Val, c_size
from fuseopt.dialects import tile


def _shape(v) -> tuple[int, ...]:  # noqa: ANN001
    t = v.type
    assert isinstance(t, TensorType)
    return tuple(t.get_shape())


def _element(em, load: tile.LoadOp, row: str, col: str) -> str:  # noqa: ANN001
    """C float expression: element (row, col) of `load`'s tile, or its fill value
    outside the buffer."""
    buf = em.values[load.buffer]
    assert isinstance(buf, Buffer)
    offsets = [em.scalar(o) for o in load.offsets]
    strides = buf.strides()
    lead = len(buf.shape) - 2
    terms = [f"{offsets[i]} * {c_size(strides[i])}" for i in range(lead)]
    conds = [f"{offsets[i]} < {buf.shape[i]}" for i in range(lead)]
    r, c = f"({offsets[lead]} + {row})", f"({offsets[lead + 1]} + {col})"
    terms += [f"{r} * {c_size(strides[lead])}", c]
    conds += [f"{r} < {buf.shape[lead]}", f"{c} < {buf.shape[lead + 1]}"]
    elem = load.result.type.element_type  # type: ignore[union-attr]
    value = op_table.to_compute(f"{buf.name}[{' + '.join(terms)}]", elem, "float")
    fill = op_table.to_compute(op_table.literal(load.fill_value, elem), elem, "float")
    return f"(({' && '.join(conds)}) ? {value} : {fill})"


def _operand(v) -> tuple[tile.LoadOp, bool]:  # noqa: ANN001
    """The load feeding dot operand `v` and whether it is transposed on the way."""
    owner = v.owner
    if isinstance(owner, tile.TransposeOp):
        return owner.input.owner, True  # type: ignore[return-value]
    assert isinstance(owner, tile.LoadOp)
    return owner, False


def _products(em, dot: tile.DotOp, acc: Val) -> None:  # noqa: ANN001
    """acc += lhs @ rhs for one iteration, each thread on its chunks of `acc`."""
    lay = acc.layout
    assert lay is not None
    k = _shape(dot.lhs)[1]
    n = _shape(dot.acc)[1]
    (la, at), (lb, bt) = _operand(dot.lhs), _operand(dot.rhs)
    em.open(f"for (int fo_q = 0; fo_q < {k}; ++fo_q)")
    for kc in range(lay.chunks):
        em.open("")
        em.line(f"const int fo_e = {lay.chunk_start(kc)};")
        em.line(f"const int fo_m = fo_e / {n}, fo_n = fo_e % {n};")
        guarded = lay.guarded and (kc + 1) * lay.nt * lay.v > lay.n
        if guarded:
            em.open(f"if (fo_e < {lay.n})")
        a = _element(em, la, "fo_q", "fo_m") if at else _element(em, la, "fo_m", "fo_q")
        em.line(f"const float fo_a = {a};")
        for j in range(lay.v):
            col = f"fo_n + {j}" if j else "fo_n"
            b = _element(em, lb, col, "fo_q") if bt else _element(em, lb, "fo_q", col)
            em.line(f"{em.slot(acc, kc, j)} += fo_a * {b};")
        if guarded:
            em.close()
        em.close()
    em.close()


def print_register_loop(em, loop: scf.ForOp, dots: list[tile.DotOp]) -> None:  # noqa: ANN001
    """Print K loop `loop` (its `dots` in iter_arg order, over operand loads) with the
    operands read from global memory and the accumulators in registers."""
    accs = []
    for d, init in zip(dots, loop.iter_args, strict=True):
        lay = em.layout(_shape(d.acc))
        src = em.as_dist(em.val(init), lay)
        acc = em.new_dist(lay.shape, f32, "acc", lay)
        em.for_slots(lay, lambda k, j, o=acc, s=src: f"{em.slot(o, k, j)} = {em.slot(s, k, j)};")
        accs.append(acc)
    lb, ub, step = em.scalar(loop.lb), em.scalar(loop.ub), em.scalar(loop.step)
    iv = em.fresh("iv")
    em.values[loop.body.block.args[0]] = iv
    em.open(f"for (long long {iv} = {lb}; {iv} < {ub}; {iv} += {step})")
    em.loop_depth += 1
    for d, acc in zip(dots, accs, strict=True):
        _products(em, d, acc)
    em.loop_depth -= 1
    em.close()
    for res, acc in zip(loop.results, accs, strict=True):
        em.values[res] = acc
