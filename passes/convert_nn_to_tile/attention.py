"""The attention schedule: one `nn.attention` as one flash-attention kernel
(FlashAttention-2's forward): a program per (batch, query head, block of queries: one
or more query tiles of BM) streams the key/value blocks of BN keys through an online
softmax, so the L x S scores never leave the chip.

Per query tile, with Q [BM, D] loaded once and f32 state m [BM] (running row max),
l [BM] (running sum) and acc [BM, Dv]:

    for each key block:  s = Q K^T * scale * log2(e)  (masked: -inf)
                         m' = max(m, rowmax(s));  p = 2^(s - m')
                         l = l * 2^(m - m') + rowsum(p)
                         acc = acc * 2^(m - m') + p V;  m = m'
    out = acc / l                                     (0 for a row that kept no key)

The scores are kept in base-2 units (an additive mask is scaled by log2(e) too, kept
finite where it was), so each exponential is one `nn.exp2` (exp2f: one hardware ex2 with
its range handled) and the scale costs no extra multiply.

Key blocks come in two loops: the blocks every row of the program keeps whole (no bounds
or causal mask to compute), then the blocks on the causal diagonal and the ragged end of
the keys (masked by index comparisons). A causal program stops at its last row's
diagonal, each of its query tiles at its own, and causal programs are ordered longest
first over all heads (the last query block of every head, then the one before), so the
grid ends with short programs. A query head reads key/value head `h // (Hq / Hkv)`
(grouped-query attention without repeating K and V); a mask operand is read per block at
its own broadcast shape (a dim of 1 is indexed at 0 and broadcast in registers). Head
dims are padded to a power of two by masked loads. `tile-promote` picks the launch knobs.

Operands and the output may be stored sequence-major, [B, S, H, E] (the layout the
projections write, before the head transpose): `seq_major` names them, and the
kernel then reads and writes that buffer viewed as [B, S, H * E], a head being a
column block, so convert-nn-to-tile drops the transposes around the attention
(`sequence_major_operands`). Only for power-of-two head dims (a padded column would
read the next head) and unpacked queries. Where q, k or v is a column block of wider
rows (one projection's [B, S, 3 * H * E] output split in three, as GPT-2's), the kernel
reads it from those rows at the block's column offset: the slice is not lowered either.

A program may hold several independent query tiles (`QUERY_TILES`): each key block's
q @ k^T is issued for every tile before any tile's softmax, so the softmax of one tile
overlaps the tensor-core work of another.

`plan_attention` also packs the query heads of a key/value group as one program's rows
when no row needs a mask of its own, and splits the keys of short queries into chunks
merged by `combine_kernel` when the row blocks alone would leave the GPU idle (a decode
step).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import (
    Float32Type,
    IndexType,
    IntegerAttr,
    MemRefType,
    StringAttr,
    TensorType,
    f32,
    i1,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue

from fuseopt.dialects import nn, tile
from fuseopt.dialects.syntax import int_array, is_bool
from fuseopt.passes.convert_nn_to_tile.analysis import shape as _shape
from fuseopt.passes.convert_nn_to_tile.index_constants import IndexConstants

F32_MAX = 3.4028234663852886e38
"""The largest finite f32."""

LOG2E = 1.4426950408889634
"""log2(e): scores times this are in base-2 units (exp(x) = 2^(x log2 e))."""

MAX_HEAD_DIM = 256
"""The largest head dim (query/key and value) the schedule takes; nn-decompose expands
attention with a larger one into matmul, softmax and matmul."""


@dataclass(frozen=True)
class AttentionBlocks:
    """The tile sizes of an attention kernel."""

    block_m: int
    """Queries per query tile (a program holds `query_tiles` of them)."""
    block_n: int
    """Keys per step of the key loop."""
    head: int
    """The query/key head dim padded to a power of two."""
    value_head: int
    """The value head dim padded to a power of two."""
    query_tiles: int = 1
    """Independent query tiles of `block_m` rows per program (`QUERY_TILES`)."""

    @property
    def program_rows(self) -> int:
        """Query rows per program: `block_m` times `query_tiles`."""
        return self.block_m * self.query_tiles


def _pow2_at_least(n: int, least: int = 16) -> int:
    p = least
    while p < n:
        p *= 2
    return p


def attention_schedule_refusal(op: nn.AttentionOp) -> str | None:
    """Why the attention schedule does not take `op` (None when it does): a head dim
    above MAX_HEAD_DIM, or an empty operand."""
    e, ev = _shape(op.query)[-1], _shape(op.value)[-1]
    if max(e, ev) > MAX_HEAD_DIM:
        return f"head dim {max(e, ev)} is above {MAX_HEAD_DIM}"
    if any(d == 0 for x in (op.query, op.key, op.value) for d in _shape(x)):
        return "an operand is empty"
    return None


@dataclass(frozen=True)
class AttentionPlan:
    """How one nn.attention is laid out: its tile sizes, whether the query heads of a
    group are packed into one program's rows, and how many key chunks split it."""

    blocks: AttentionBlocks
    packed: bool
    """The G = Hq / Hkv query heads of a key/value head are the rows of one program
    (the query viewed as [B, Hkv, G * L, E]): each key/value block is read once for the
    whole group. Taken for grouped heads when no row needs its own mask (not causal, and
    a mask, if any, is the same for every head and query)."""
    splits: int
    """Key chunks per row block (1: none). Each chunk's program writes its normalized
    partial output, its score max and its sum of exponentials; a combine kernel merges
    them. Taken when the
    row blocks alone would leave the GPU idle (a decode step) and not causal."""
    chunk: int
    """Keys per chunk (a multiple of BN); the key length when not split."""
    dynamic_keys: bool = False
    """The key length is the dynamic size of a function lowered at a size hint
    (`nn.SIZE_HINT_ATTR`): the kernel computes what depends on it (the last whole key
    block, a split plan's chunk) from it at run time, keeps the masked ragged-end loop,
    and a split plan has a power-of-two number of chunks of
    `ceil(S / (splits * BN)) * BN` keys (a block count that tile IR computes from the
    size), however many of them hold keys."""


SPLIT_PROGRAMS = 256
"""Programs a split attention aims for (about two per SM of an H100 or H200): a plan
whose row blocks make fewer splits its keys into chunks until it has about these."""

MIN_CHUNK_BLOCKS = 4
"""The fewest key blocks a chunk holds (shorter chunks cost more in the combine than
they gain)."""

MAX_SPLITS = 16
"""The most key chunks (the combine kernel holds a tile of one row per chunk)."""

QUERY_TILES = 2
"""Query tiles per program of long unmasked attention whose tiles are 128 rows of
128-wide heads (an 8-warp tensor-core tile), when the programs still fill the GPU (at
least SPLIT_PROGRAMS of them): each key block's two q @ k^T products are issued before
either tile's softmax, so one tile's exponentials overlap the other's tensor-core work
(FlashAttention-3's intra-warpgroup overlap, written as independent tiles, which
Triton's asynchronous wgmma then overlaps). bf16, head dim 128, on an H200, kernel us,
`benchmarks.attention`, one tile -> two (cuDNN's SDPA in the same run):

- not causal (2026-11-27): 4 x 16 x 2048^2 292.5 -> 255.0 (225.3), 2 x 16 x 4096^2
  557.7 -> 499.0 (446.1), 1 x 16 x 8192^2 1094.5 -> 979.1 (878.8);
- causal, programs longest first (2026-11-27, 128-key steps for one tile, 64 for two):
  the same shapes 181.7 -> 172.2 (145.5), 307.5 -> 291.6 (268.3), 572.2 -> 534.1 (492.0).

A hand-written sweep found 128-key steps or 2 stages slower with two tiles; two causal
tiles with 128-key steps were slower than one, and BERT's masked 64-wide heads 1.2x
slower with two tiles (`takes_query_tiles`)."""


def plan_attention(
    op: nn.AttentionOp,
    block_m: int = 0,
    block_n: int = 0,
    query_tiles: int = 0,
    dynamic_keys: bool = False,
) -> AttentionPlan:
    """The layout of `op` (forced `block_m` / `block_n` caps and `query_tiles` when
    non-zero; query tiles are QUERY_TILES where `takes_query_tiles` says so;
    `dynamic_keys`: see `AttentionPlan`)."""
    batch, heads, lq, _ = _shape(op.query)
    kv_heads, s = _shape(op.key)[1], _shape(op.key)[2]
    group = heads // kv_heads
    row_free_mask = op.mask is None or _shape(op.mask)[1:3] == (1, 1)
    packed = group > 1 and not op.is_causal and row_free_mask
    rows, programs_heads = (group * lq, kv_heads) if packed else (lq, heads)
    batch_heads = batch * programs_heads  # (batch, head) pairs, each split into row blocks
    tiles = query_tiles or QUERY_TILES
    blocks = choose_attention_blocks(op, block_m, block_n, rows, tiles)
    if not query_tiles and not takes_query_tiles(op, blocks, rows, batch_heads):
        blocks = choose_attention_blocks(op, block_m, block_n, rows, 1)
    programs = batch_heads * -(-rows // blocks.program_rows)
    splits, chunk = 1, s
    if not op.is_causal and programs < SPLIT_PROGRAMS:
        most = min(MAX_SPLITS, s // (MIN_CHUNK_BLOCKS * blocks.block_n))
        splits = max(1, min(most, -(-SPLIT_PROGRAMS // programs)))
        if dynamic_keys:  # the hint's key length: a power of two, chunks from the size
            splits = 1 << (min(MAX_SPLITS, -(-SPLIT_PROGRAMS // programs)).bit_length() - 1)
            chunk = -(-s // (splits * blocks.block_n)) * blocks.block_n
        elif splits > 1:
            chunk = -(-s // splits)
            chunk = -(-chunk // blocks.block_n) * blocks.block_n
            splits = -(-s // chunk)
    return AttentionPlan(blocks, packed, splits, chunk if splits > 1 else s, dynamic_keys)


def takes_query_tiles(
    op: nn.AttentionOp, blocks: AttentionBlocks, rows: int, batch_heads: int
) -> bool:
    """Whether `op` under `blocks` (chosen for QUERY_TILES tiles), its programs covering
    `rows` query rows for each of `batch_heads` (batch, head) pairs, gets QUERY_TILES
    query tiles per program by default: the cases measured faster, no mask operand,
    128-row tiles of 128-wide heads (the 8-warp tensor-core tile), 64-key steps, a count
    of 128-row tiles that QUERY_TILES divides, so that no program carries a tile past the
    last row (a tile of zeros costs as much as a full one), and programs that still
    number SPLIT_PROGRAMS (no key split is needed to fill the GPU). BERT's masked
    attention with 64-wide heads (16 x 16 x 512^2, bf16, H200) was slower with two
    tiles: 61.4 -> 76.4 us of kernel time; causal attention with 64-wide heads
    (4 x 32 x 2048^2) 202.1 -> 263.3."""
    return (
        op.mask is None
        and blocks.block_m == 128
        and blocks.block_n == 64
        and blocks.head == blocks.value_head == 128
        and -(-rows // blocks.block_m) % QUERY_TILES == 0
        and batch_heads * -(-rows // (blocks.block_m * QUERY_TILES)) >= SPLIT_PROGRAMS
    )


def choose_attention_blocks(
    op: nn.AttentionOp, block_m: int = 0, block_n: int = 0, rows: int = 0, query_tiles: int = 1
) -> AttentionBlocks:
    """Tile sizes for `op` (whose programs cover `rows` query rows, default its query
    length) with `query_tiles` tiles per program: BM rows per query tile, at most
    `block_m` (default 128), and no more than the rows rounded up to a power of two (at
    least 16, the smallest tensor-core tile); BN keys a step, at most `block_n` (default
    64) and the keys rounded up; a causal kernel of one tile with head dims of 128 or
    more takes BN = BM by default (on an H200 at head dim 128, 128-key steps made causal
    2k-8k prefill 8-15 % faster; non-causal ones were 3 % slower, causal ones at head
    dim 64 15 % slower, and two tiles slower: see QUERY_TILES) and any causal kernel
    keeps BN <= BM (its loop split needs BM a multiple of BN). Both caps are halved for
    head dims above 128 (the tiles are twice as wide)."""
    _, _, lq, e = _shape(op.query)
    s, ev = _shape(op.key)[2], _shape(op.value)[-1]
    head, value_head = _pow2_at_least(e), _pow2_at_least(ev)
    wide = max(head, value_head) > 128
    halve = 2 if wide else 1
    bm_cap = max(16, (block_m or 128) // halve)
    bn_cap = max(16, (block_n or 64) // halve)
    bm = max(16, min(bm_cap, _pow2_at_least(rows or lq)))
    if op.is_causal and not block_n and query_tiles == 1 and max(head, value_head) >= 128:
        bn_cap = bm
    bn = max(16, min(bn_cap, _pow2_at_least(s)))
    if op.is_causal:
        bn = min(bn, bm)
    return AttentionBlocks(bm, bn, head, value_head, query_tiles)


class _Builder:
    """Appends ops to a block; `index(n)` makes index constants, hoisted to the kernel
    entry when it is done."""

    def __init__(self, entry: Block):
        self.entry = entry
        self.block = entry
        self.index = IndexConstants()

    def add(self, op: Operation) -> SSAValue:
        self.block.add_op(op)
        return op.results[0]

    def splat(self, value: float, t: TensorType) -> SSAValue:
        return self.add(nn.ConstantOp(float(value), t))

    def cast(self, x: SSAValue, element: Attribute) -> SSAValue:
        t = x.type
        assert isinstance(t, TensorType)
        if t.element_type == element:
            return x
        return self.add(nn.CastOp(x, TensorType(element, t.get_shape())))

    def rows(self, x: SSAValue, shape: Sequence[int]) -> SSAValue:
        """A [BM] tile broadcast along a new last dim to `shape`."""
        return self.add(tile.BroadcastOp(x, [0], TensorType(f32, list(shape))))


@dataclass(frozen=True)
class AttentionShapes:
    """The buffers an attention plan's kernels read and write (see `attention_shapes`)."""

    query: tuple[int, ...]
    """[B, H, R, E]: the query as the kernel rows it (packed: [B, Hkv, G * L, E])."""
    out: tuple[int, ...]
    """[B, H, R, Ev]: the output the same way."""
    partial_out: tuple[int, ...] | None
    """[B, H, splits, R, Ev] f32: each chunk's normalized output (split plans)."""
    partial_stats: tuple[int, ...] | None
    """[B, H, splits, R] f32: the shape of each chunk's two row statistics (split
    plans): its running max of the scores in base-2 units and its sum of their
    exponentials (kept apart, not as one log-sum-exp: with rows whose scores are all
    about -F32_MAX, a fully masked row, `max + log2(sum)` rounds to the max and loses
    the sum, which weighs the chunks)."""


def attention_shapes(op: nn.AttentionOp, plan: AttentionPlan) -> AttentionShapes:
    """The shapes of the buffers `plan`'s kernels take for `op`."""
    batch, heads, lq, e = _shape(op.query)
    kv_heads = _shape(op.key)[1]
    ev = _shape(op.value)[-1]
    h, rows = (kv_heads, heads // kv_heads * lq) if plan.packed else (heads, lq)
    split = plan.splits > 1
    return AttentionShapes(
        (batch, h, rows, e),
        (batch, h, rows, ev),
        (batch, h, plan.splits, rows, ev) if split else None,
        (batch, h, plan.splits, rows) if split else None,
    )


SEQ_MAJOR_ROLES = ("query", "key", "value", "out")
"""The attention buffers that may be stored sequence-major ([B, S, H, E])."""


def seq_major_allowed(op: nn.AttentionOp, plan: AttentionPlan, role: str) -> bool:
    """Whether buffer `role` of `op` may be read or written sequence-major under
    `plan`: its head dim is its padded tile width (no column of the next head is
    read), and the query and output are not packed (a split plan's output is written
    by its combine kernel, sequence-major too)."""
    blocks = plan.blocks
    if role in ("query", "key"):
        fits = _shape(op.query)[-1] == blocks.head
    else:
        fits = _shape(op.value)[-1] == blocks.value_head
    if role in ("query", "out") and plan.packed:
        return False
    return fits


def seq_major_shape(shape: Sequence[int], columns: int | None = None) -> list[int]:
    """The [B, S, H * E] view of a [B, H, S, E] buffer stored sequence-major; rows
    `columns` wide when its heads are a column block of wider rows (a packed QKV)."""
    b, h, n, e = shape
    return [b, n, columns if columns is not None else h * e]


@dataclass(frozen=True)
class SeqMajor:
    """How the kernel reads (or writes) one operand sequence-major: the buffer holding
    it (`source`: the head transpose's input, or the value a column slice of it was
    taken from) viewed as [B, S, `columns`], head h at column `offset + h * E`; and
    the ops the kernel absorbs (not lowered: the transpose, a reshape and a slice)."""

    source: SSAValue
    columns: int
    offset: int
    ops: tuple[Operation, ...]


HEAD_TRANSPOSE = (0, 2, 1, 3)
"""The permutation between [B, S, H, E] and [B, H, S, E]."""


def sequence_major_operands(
    block: Block, plan_of: Callable[[nn.AttentionOp], AttentionPlan]
) -> dict[nn.AttentionOp, dict[str, SeqMajor]]:
    """The head transposes of `block` that its attention kernels absorb, by attention op
    and role: a query, key or value that is a top-level head transpose's only use, and
    an output whose only user is one; each where `seq_major_allowed` under the op's plan
    (`plan_of`). The kernel then reads the transpose's input, or writes its result,
    sequence-major, and the transpose is not lowered: no copy kernel. An operand whose
    transpose reads `reshape(slice(x))`, a column block of x's rows (GPT-2's q, k and v
    split from one projection), is read from x itself, the reshape and slice absorbed
    too (`_column_block`)."""
    found: dict[nn.AttentionOp, dict[str, SeqMajor]] = {}
    for op in block.ops:
        if not isinstance(op, nn.AttentionOp) or attention_schedule_refusal(op) is not None:
            continue
        plan = plan_of(op)
        roles: dict[str, SeqMajor] = {}
        for role, v in (("query", op.query), ("key", op.key), ("value", op.value)):
            owner = v.owner
            if _head_transpose(owner, block) and len(list(v.uses)) == 1:
                if seq_major_allowed(op, plan, role):
                    assert isinstance(owner, nn.TransposeOp)
                    roles[role] = _column_block(owner, block) or SeqMajor(
                        owner.input, _width(v), 0, (owner,)
                    )
        users = [u.operation for u in op.result.uses]
        if len(users) == 1 and _head_transpose(users[0], block):
            if seq_major_allowed(op, plan, "out"):
                moved = users[0]
                assert isinstance(moved, nn.TransposeOp)
                roles["out"] = SeqMajor(moved.result, _width(op.result), 0, (moved,))
        if roles:
            found[op] = roles
    return found


def _width(v: SSAValue) -> int:
    """H * E of a [B, H, S, E] value."""
    _, h, _, e = _shape(v)
    return h * e


def _column_block(transpose: nn.TransposeOp, block: Block) -> SeqMajor | None:
    """The read of `transpose`'s operand from the rows it is a column block of, when
    that operand is `reshape(slice(x))`: x is [B, S, T], the slice keeps every row and
    a contiguous run of columns, the reshape splits that run into [H, E], and each
    result has one use; else None."""
    reshape = transpose.input.owner
    if not isinstance(reshape, nn.ReshapeOp) or reshape.parent_block() is not block:
        return None
    cut = reshape.input.owner
    if not isinstance(cut, nn.SliceOp) or cut.parent_block() is not block:
        return None
    if len(list(reshape.result.uses)) != 1 or len(list(cut.result.uses)) != 1:
        return None
    source, sliced, split = _shape(cut.input), _shape(cut.result), _shape(reshape.result)
    if len(source) != 3 or len(split) != 4 or sliced[:2] != split[:2]:
        return None
    *rows, (lo, hi, step) = cut.bounds
    if step != 1 or any(bound != (0, n, 1) for bound, n in zip(rows, source, strict=False)):
        return None
    if hi - lo != split[2] * split[3]:
        return None
    return SeqMajor(cut.input, source[2], lo, (transpose, reshape, cut))


def _head_transpose(op: object, block: Block) -> bool:
    return (
        isinstance(op, nn.TransposeOp)
        and op.parent_block() is block
        and tuple(op.perm) == HEAD_TRANSPOSE
    )


def attention_kernel(
    name: str,
    op: nn.AttentionOp,
    plan: AttentionPlan,
    seq_major: Mapping[str, tuple[int, int]] | None = None,
) -> tuple[tile.KernelOp, int]:
    """The flash-attention kernel of `op` under `plan` and its number of programs. Its
    parameters: query (in `attention_shapes`' form), key, value, the mask if any, then
    the output, or the partial outputs and log-sum-exps of a split plan; the buffers
    named in `seq_major` ([`seq_major_allowed`]) as [B, S, columns] views, head h at
    column `offset + h * E` (role -> (columns, offset), see `SeqMajor`)."""
    seq_major = dict(seq_major or {})
    shapes = attention_shapes(op, plan)
    element = _element(op.query)
    for role in seq_major:
        assert seq_major_allowed(op, plan, role), role

    def param(role: str, t: MemRefType) -> MemRefType:
        if role not in seq_major:
            return t
        return MemRefType(t.element_type, seq_major_shape(t.get_shape(), seq_major[role][0]))

    types = [
        param("query", MemRefType(element, shapes.query)),
        param("key", _memref(op.key)),
        param("value", _memref(op.value)),
        *([_memref(op.mask)] if op.mask is not None else []),
    ]
    split = plan.splits > 1
    if split:
        assert shapes.partial_out is not None and shapes.partial_stats is not None
        stats = MemRefType(f32, shapes.partial_stats)
        types += [MemRefType(f32, shapes.partial_out), stats, stats]
    else:
        types.append(param("out", MemRefType(element, shapes.out)))
    kernel = tile.KernelOp(name, 1, types)
    batch, heads, rows, _ = shapes.query
    kv_heads, s = _shape(op.key)[1], _shape(op.key)[2]
    blocks = plan.blocks
    bm, bn, d, dv = blocks.block_m, blocks.block_n, blocks.head, blocks.value_head
    n_tiles, program_rows = blocks.query_tiles, blocks.program_rows
    kernel.schedule = StringAttr(tile.Schedule.ATTENTION.value)
    kernel.iteration_sizes = int_array([batch, heads, rows, s])
    kernel.block_sizes = int_array([1, 1, program_rows, bn])
    entry = kernel.body.block
    q_param, k_param, v_param = entry.args[:3]
    mask_param = entry.args[3] if op.mask is not None else None
    b = _Builder(entry)
    m_blocks = -(-rows // program_rows)

    # program -> (batch, head, query block[, key chunk]); the last query block first
    pid = b.add(tile.ProgramIdOp(0))
    chunk_id = b.add(arith.RemSIOp(pid, b.index(plan.splits))) if split else None
    rest = b.add(arith.DivSIOp(pid, b.index(plan.splits))) if split else pid
    if op.is_causal:
        # the query block varies slowest, so every head's longest programs start
        # first and the grid ends with short ones (head by head, the last programs
        # would be the last head's longest: 4 x 16 x 2048^2 at head dim 128 took
        # 207.6 us that way, 181.7 this way, on an H200)
        from_end = b.add(arith.DivSIOp(rest, b.index(batch * heads)))
        bh = b.add(arith.RemSIOp(rest, b.index(batch * heads)))
    else:
        from_end = b.add(arith.RemSIOp(rest, b.index(m_blocks)))
        bh = b.add(arith.DivSIOp(rest, b.index(m_blocks)))
    m_block = b.add(arith.SubiOp(b.index(m_blocks - 1), from_end))
    head = b.add(arith.RemSIOp(bh, b.index(heads)))
    bat = b.add(arith.DivSIOp(bh, b.index(heads)))
    group = 1 if plan.packed else heads // kv_heads
    kv_head = b.add(arith.DivSIOp(head, b.index(group))) if group > 1 else head
    m0 = b.add(arith.MuliOp(m_block, b.index(program_rows)))
    # the first row of each query tile
    row0s = [m0] + [b.add(arith.AddiOp(m0, b.index(t * bm))) for t in range(1, n_tiles)]
    zero = b.index(0)

    # a sequence-major buffer holds head h as the column block at offset + h * width
    # (computed once here, not per key block)
    column = {
        role: _column(b, h, width, seq_major[role][1])
        for role, h, width in (
            ("query", head, d),
            ("key", kv_head, d),
            ("value", kv_head, dv),
            ("out", head, dv),
        )
        if role in seq_major
    }

    def box(role: str, h: SSAValue, row0: SSAValue) -> list[SSAValue]:
        """Offsets of the tile of head `h` from row `row0` of buffer `role`."""
        if role in column:
            return [bat, row0, column[role]]
        return [bat, h, row0, zero]

    qs = [b.add(tile.LoadOp(q_param, box("query", head, r0), [bm, d])) for r0 in row0s]
    score_t, acc_t, row_t = (
        TensorType(f32, [bm, bn]),
        TensorType(f32, [bm, dv]),
        TensorType(f32, [bm]),
    )
    scale = op.scale_value
    neg_inf = float("-inf")

    def scores_of(q: SSAValue, kt: SSAValue) -> SSAValue:
        """One tile's q @ k^T in base-2 units (times scale * log2(e))."""
        scores = b.add(tile.DotOp(q, kt, b.splat(0.0, score_t)))
        return b.add(nn.MulOp(scores, b.splat(scale * LOG2E, score_t)))

    def masked_scores(
        scores: SSAValue, n0: SSAValue, row0: SSAValue, masked: bool, causal: bool
    ) -> SSAValue:
        """One tile's scores (rows from `row0`, keys from `n0`) under the bounds mask
        (in a `masked` loop), the causal mask (where `causal`) and the mask operand:
        -inf where dropped."""
        ninf = b.splat(neg_inf, score_t)
        if masked:
            ragged_static = s % bn and not plan.dynamic_keys
            cols = _index_tile(b, n0, bn, 1, [bm, bn]) if causal or ragged_static else None
            if plan.dynamic_keys:  # the key length from the size at run time
                keys = b.add(tile.MaskOp([n0], [s], [bn]))
                in_range = b.add(tile.BroadcastOp(keys, [1], TensorType(i1, [bm, bn])))
                scores = b.add(nn.SelectOp(in_range, scores, ninf))
            elif ragged_static:  # a block may reach past the last key
                assert cols is not None
                in_range = b.add(nn.CompareOp("lt", cols, _index_splat(b, s, [bm, bn])))
                scores = b.add(nn.SelectOp(in_range, scores, ninf))
            if causal:
                rows_ = _index_tile(b, row0, bm, 0, [bm, bn])
                keep = b.add(nn.CompareOp("le", cols, rows_))
                scores = b.add(nn.SelectOp(keep, scores, ninf))
        if mask_param is not None:
            scores = _apply_mask(b, mask_param, [bat, head, row0, n0], bm, bn, scores, ninf)
        return scores

    def update(scores: SSAValue, v: SSAValue, state: Sequence[SSAValue]) -> list[SSAValue]:
        """The online-softmax update of one tile's (m, l, acc) by its scores."""
        m_i, l_i, acc = state
        peak = b.add(tile.ReduceOp("max", scores, 1))
        m_new = b.add(nn.MaxOp(m_i, peak))
        dead = b.add(nn.CompareOp("eq", m_new, b.splat(neg_inf, row_t)))
        m_safe = b.add(nn.SelectOp(dead, b.splat(0.0, row_t), m_new))
        p = b.add(nn.Exp2Op(b.add(nn.SubOp(scores, b.rows(m_safe, [bm, bn])))))
        alpha = b.add(nn.Exp2Op(b.add(nn.SubOp(m_i, m_safe))))
        l_new = b.add(nn.AddOp(b.add(nn.MulOp(l_i, alpha)), b.add(tile.ReduceOp("sum", p, 1))))
        scaled = b.add(nn.MulOp(acc, b.rows(alpha, [bm, dv])))
        acc_new = b.add(tile.DotOp(b.cast(p, _element(op.value)), v, scaled))
        return [m_new, l_new, acc_new]

    def step(
        blk: Block,
        n0: SSAValue,
        tiles: Sequence[int],
        state: Sequence[SSAValue],
        masked: bool,
        causal: Sequence[int],
    ) -> list[SSAValue]:
        """One key block at `n0` for query tiles `tiles` (their states in `state`, in
        order): every tile's q @ k^T first (independent tensor-core work to overlap the
        softmaxes with), then each tile's online-softmax update; the tiles in `causal`
        take the causal mask."""
        b.block = blk
        k = b.add(tile.LoadOp(k_param, box("key", kv_head, n0), [bn, d]))
        kt = b.add(tile.TransposeOp(k, [1, 0]))
        scores = [scores_of(qs[t], kt) for t in tiles]
        scores = [
            masked_scores(x, n0, row0s[t], masked, t in causal)
            for x, t in zip(scores, tiles, strict=True)
        ]
        v = b.add(tile.LoadOp(v_param, box("value", kv_head, n0), [bn, dv]))
        new: list[SSAValue] = []
        for i, x in enumerate(scores):
            new += update(x, v, state[3 * i : 3 * i + 3])
        return new

    def loop(
        lb: SSAValue,
        ub: SSAValue,
        states: list[list[SSAValue]],
        masked: bool,
        tiles: Sequence[int] = tuple(range(n_tiles)),
        causal: Sequence[int] = (),
    ) -> None:
        """The key blocks [lb, ub) for query tiles `tiles`, whose (m, l, acc) in
        `states` it replaces by the loop's results."""
        body = Block(arg_types=[IndexType(), *[row_t, row_t, acc_t] * len(tiles)])
        outer = b.block
        new = step(body, body.args[0], tiles, list(body.args[1:]), masked, causal)
        body.add_op(scf.YieldOp(*new))
        b.block = outer
        carried = [v for t in tiles for v in states[t]]
        for_op = scf.ForOp(lb, ub, b.index(bn), carried, body)
        b.block.add_op(for_op)
        for i, t in enumerate(tiles):
            states[t] = list(for_op.results[3 * i : 3 * i + 3])

    def store(state: Sequence[SSAValue], row0: SSAValue) -> None:
        """One query tile's normalized output from its final (m, l, acc), at `row0` (a
        split plan's chunk also stores m and l)."""
        m_fin, l_fin, acc_fin = state
        empty = b.add(nn.CompareOp("eq", l_fin, b.splat(0.0, row_t)))
        divisor = b.add(nn.SelectOp(empty, b.splat(1.0, row_t), l_fin))
        out = b.add(nn.DivOp(acc_fin, b.rows(divisor, [bm, dv])))
        if not split:
            entry.add_op(tile.StoreOp(b.cast(out, element), entry.args[-1], box("out", head, row0)))
            return
        assert chunk_id is not None
        o_param, max_param, sum_param = entry.args[-3:]
        entry.add_op(tile.StoreOp(out, o_param, [bat, head, chunk_id, row0, zero]))
        entry.add_op(tile.StoreOp(m_fin, max_param, [bat, head, chunk_id, row0]))
        entry.add_op(tile.StoreOp(l_fin, sum_param, [bat, head, chunk_id, row0]))

    states = [
        [b.splat(neg_inf, row_t), b.splat(0.0, row_t), b.splat(0.0, acc_t)] for _ in range(n_tiles)
    ]
    whole = s - s % bn  # keys in whole blocks
    ragged = plan.dynamic_keys or whole < s  # a masked loop over the last, ragged block
    if plan.dynamic_keys:  # from the key length, which the size gives at run time
        s_end = _fresh_index(b, s)
        whole_end = b.add(arith.SubiOp(s_end, b.add(arith.RemSIOp(s_end, b.index(bn)))))
    else:
        s_end, whole_end = b.index(s), b.index(whole)
    if op.is_causal:
        # blocks left of the program's diagonal are kept whole by every row; then
        # tile t's diagonal band, [m0 + t * BM, m0 + (t + 1) * BM), for tiles t and
        # after (the later ones keep it whole: no causal mask), so no tile steps
        # through keys right of its own diagonal
        lo = b.add(arith.MinSIOp(m0, whole_end))
        loop(zero, lo, states, masked=False)
        for t in range(n_tiles):
            band_end = b.add(arith.AddiOp(m0, b.index((t + 1) * bm)))
            hi = b.add(arith.MinSIOp(band_end, s_end))
            loop(lo, hi, states, masked=True, tiles=range(t, n_tiles), causal=(t,))
            lo = hi
    elif split:
        assert chunk_id is not None
        # this chunk's keys [lo, hi): whole blocks first, then the ragged end if it is here
        if plan.dynamic_keys:  # ceil(S / (splits * BN)) blocks: a count of the size's
            blocks_per_chunk = _fresh_index(b, plan.chunk // bn)
            chunk = b.add(arith.MuliOp(blocks_per_chunk, b.index(bn)))
        else:
            chunk = b.index(plan.chunk)
        lo = b.add(arith.MuliOp(chunk_id, chunk))
        hi = b.add(arith.MinSIOp(b.add(arith.AddiOp(lo, chunk)), s_end))
        full_end = b.add(arith.MaxSIOp(lo, b.add(arith.MinSIOp(hi, whole_end))))
        loop(lo, full_end, states, masked=False)
        if ragged:
            loop(full_end, hi, states, masked=True)
    else:
        if whole or plan.dynamic_keys:
            loop(zero, whole_end, states, masked=False)
        if ragged:
            loop(whole_end, s_end, states, masked=True)
    for state, row0 in zip(states, row0s, strict=True):
        store(state, row0)
    entry.add_op(tile.ReturnOp())
    b.index.hoist(entry)
    return kernel, batch * heads * m_blocks * plan.splits


COMBINE_TILE_ELEMENTS = 8192
"""The largest [chunks, rows, Ev] tile the combine kernel holds."""


def combine_kernel(
    name: str, op: nn.AttentionOp, plan: AttentionPlan, out_layout: tuple[int, int] | None = None
) -> tuple[tile.KernelOp, int]:
    """The kernel merging a split plan's chunks and its number of programs: per row,
    weights l_c 2^(m_c - max_c m_c) (chunk c's sum of exponentials and score max), the
    output sum_c w_c o_c / sum_c w_c (0 for a row no chunk kept a key of). Parameters:
    partial outputs, score maxima, sums of exponentials, output. With
    `out_layout` (columns, offset; see `SeqMajor`) the output is written sequence-major,
    [B, L, columns] with head h at column `offset + h * Ev`, as `attention_kernel` writes
    an unsplit one."""
    shapes = attention_shapes(op, plan)
    assert shapes.partial_out is not None and shapes.partial_stats is not None
    assert out_layout is None or seq_major_allowed(op, plan, "out")
    element = _element(op.query)
    out_shape = (
        list(shapes.out) if out_layout is None else seq_major_shape(shapes.out, out_layout[0])
    )
    types = [
        MemRefType(f32, shapes.partial_out),
        MemRefType(f32, shapes.partial_stats),
        MemRefType(f32, shapes.partial_stats),
        MemRefType(element, out_shape),
    ]
    kernel = tile.KernelOp(name, 1, types)
    batch, heads, rows, _ = shapes.out
    chunks, dv = _pow2_at_least(plan.splits, 1), plan.blocks.value_head
    block = max(1, min(_pow2_at_least(rows, 1), COMBINE_TILE_ELEMENTS // (chunks * dv)))
    kernel.schedule = StringAttr(tile.Schedule.ATTENTION.value)
    kernel.iteration_sizes = int_array([batch, heads, rows, plan.splits])
    kernel.block_sizes = int_array([1, 1, block, chunks])
    entry = kernel.body.block
    o_param, max_param, sum_param, out_param = entry.args
    b = _Builder(entry)
    r_blocks = -(-rows // block)
    pid = b.add(tile.ProgramIdOp(0))
    r0 = b.add(arith.MuliOp(b.add(arith.RemSIOp(pid, b.index(r_blocks))), b.index(block)))
    bh = b.add(arith.DivSIOp(pid, b.index(r_blocks)))
    head = b.add(arith.RemSIOp(bh, b.index(heads)))
    bat = b.add(arith.DivSIOp(bh, b.index(heads)))
    zero = b.index(0)
    neg_inf = float("-inf")
    stats_t, row_t = TensorType(f32, [chunks, block]), TensorType(f32, [block])
    at = [bat, head, zero, r0]
    maxima = b.add(tile.LoadOp(max_param, at, [chunks, block], fill=neg_inf))
    sums = b.add(tile.LoadOp(sum_param, at, [chunks, block], fill=0.0))
    o = b.add(tile.LoadOp(o_param, [bat, head, zero, r0, zero], [chunks, block, dv]))
    peak = b.add(tile.ReduceOp("max", maxima, 0))
    dead = b.add(nn.CompareOp("eq", peak, b.splat(neg_inf, row_t)))
    peak = b.add(nn.SelectOp(dead, b.splat(0.0, row_t), peak))
    spread = b.add(tile.BroadcastOp(peak, [1], stats_t))
    w = b.add(nn.MulOp(sums, b.add(nn.Exp2Op(b.add(nn.SubOp(maxima, spread))))))
    total = b.add(tile.ReduceOp("sum", w, 0))
    wide_t = TensorType(f32, [chunks, block, dv])
    weighted = b.add(nn.MulOp(o, b.add(tile.BroadcastOp(w, [0, 1], wide_t))))
    num = b.add(tile.ReduceOp("sum", weighted, 0))
    empty = b.add(nn.CompareOp("eq", total, b.splat(0.0, row_t)))
    divisor = b.add(nn.SelectOp(empty, b.splat(1.0, row_t), total))
    out = b.add(nn.DivOp(num, b.rows(divisor, [block, dv])))
    where = (
        [bat, head, r0, zero]
        if out_layout is None
        else [bat, r0, _column(b, head, dv, out_layout[1])]
    )
    entry.add_op(tile.StoreOp(b.cast(out, element), out_param, where))
    entry.add_op(tile.ReturnOp())
    b.index.hoist(entry)
    return kernel, batch * heads * r_blocks


def _column(b: _Builder, head: SSAValue, width: int, offset: int) -> SSAValue:
    """`offset + head * width`: the first column of a head in a sequence-major row."""
    start = b.add(arith.MuliOp(head, b.index(width)))
    return b.add(arith.AddiOp(start, b.index(offset))) if offset else start


def _memref(v: SSAValue) -> MemRefType:
    t = v.type
    assert isinstance(t, TensorType)
    return MemRefType(t.element_type, t.get_shape())


def _element(v: SSAValue) -> Attribute:
    t = v.type
    assert isinstance(t, TensorType)
    return t.element_type


def _index_tile(b: _Builder, offset: SSAValue, n: int, dim: int, shape: list[int]) -> SSAValue:
    """offset + i along `dim` of `shape` (i64), broadcast over the other dim."""
    iota = b.add(tile.IotaOp(offset, 0, 1, TensorType(i64, [n])))
    return b.add(tile.BroadcastOp(iota, [dim], TensorType(i64, shape)))


def _fresh_index(b: _Builder, value: int) -> SSAValue:
    """An index constant of its own (not shared with an equal one, as `b.index`'s are):
    a value that depends on the dynamic size, which generalize-sizes replaces by what it
    computes from the size; an equal constant that does not must keep its value."""
    return b.add(arith.ConstantOp(IntegerAttr(value, IndexType())))


def _index_splat(b: _Builder, value: int, shape: list[int]) -> SSAValue:
    return b.add(nn.ConstantOp(value, TensorType(i64, shape)))


def _apply_mask(
    b: _Builder,
    mask: SSAValue,
    offsets: list[SSAValue],
    bm: int,
    bn: int,
    scores: SSAValue,
    neg_inf: SSAValue,
) -> SSAValue:
    """`scores` under the mask's block: -inf where an i1 mask is false (or outside it),
    plus a float mask (in base-2 units: times log2(e)). A dim of 1 is read at offset 0
    and broadcast."""
    t = mask.type
    assert isinstance(t, MemRefType)
    shape = t.get_shape()
    zero = b.index(0)
    at = [o if shape[i] != 1 else zero for i, o in enumerate(offsets)]
    box = [bm if shape[2] != 1 else 1, bn if shape[3] != 1 else 1]
    boolean = is_bool(t.element_type)
    loaded = b.add(tile.LoadOp(mask, at, box, fill=0))
    if box != [bm, bn]:
        full_t = TensorType(t.element_type, [bm, bn])
        loaded = b.add(tile.BroadcastOp(loaded, [0, 1], full_t))
    if boolean:
        return b.add(nn.SelectOp(loaded, scores, neg_inf))
    if not isinstance(t.element_type, Float32Type):
        loaded = b.cast(loaded, f32)
    block_t = TensorType(f32, [bm, bn])
    in_base_2 = b.add(nn.MulOp(loaded, b.splat(LOG2E, block_t)))
    # a finfo.min mask times log2(e) would overflow to -inf, and a row masked whole
    # would then be zeros instead of PyTorch's uniform average: finite values stay
    # finite (-inf, a key dropped, stays -inf)
    floor = b.add(nn.MaxOp(in_base_2, b.splat(-F32_MAX, block_t)))
    dropped = b.add(nn.CompareOp("eq", loaded, neg_inf))
    return b.add(nn.AddOp(scores, b.add(nn.SelectOp(dropped, neg_inf, floor))))
