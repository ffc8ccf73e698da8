"""The policy of mode="reduce-overhead" (`backends/cuda_graphs.GraphBook`), on the CPU.

Which call replays a CUDA graph, which records one and which runs plainly depends only
on the input shapes and addresses a call sees; the GPU tests (test_triton_gpu,
test_dynamic_sizes) check the recording and replaying themselves.
"""

from __future__ import annotations

from dataclasses import dataclass

from fuseopt.backends.cuda_graphs import GraphBook


@dataclass
class FakeGraph:
    """A recorded graph as the book sees it: the addresses it reads in place, and
    whether the caller still holds its last outputs."""

    pinned: tuple[tuple[int, int], ...]
    busy: bool = False

    def matches(self, pointers: tuple[int, ...]) -> bool:
        return all(pointers[i] == p for i, p in self.pinned)

    def free(self) -> bool:
        return not self.busy


def _book(max_graphs: int = 8, instances: int = 2, max_records: int = 8) -> GraphBook:
    return GraphBook(max_graphs, instances, max_records, max_seen=1024)


def _call(book: GraphBook, key: tuple, pointers: tuple[int, ...]) -> str:
    """One call: the decision's kind; a recording is kept as a FakeGraph."""
    d = book.choose(key, pointers)
    if d.kind == "record":
        pinned = tuple((i, p) for i, (p, s) in enumerate(zip(pointers, d.stable, strict=True)) if s)
        book.add(key, FakeGraph(pinned))
    return d.kind


def test_a_graph_is_recorded_at_the_second_call_and_pins_what_stayed() -> None:
    book = _book()
    assert _call(book, ("s",), (100, 1)) == "plain"  # first sight: compiles, plainly
    d = book.choose(("s",), (100, 2))  # the weight (100) stayed, the activation moved
    assert d.kind == "record" and d.stable == (True, False)
    book.add(("s",), FakeGraph(((0, 100),)))
    assert [_call(book, ("s",), (100, a)) for a in (3, 4, 5)] == ["replay"] * 3


def test_outputs_held_by_the_caller_get_a_second_instance_then_plain_launches() -> None:
    book = _book(instances=2)
    _call(book, ("s",), (100,))
    _call(book, ("s",), (100,))
    (first,) = book.graphs[("s",)]
    first.busy = True
    assert _call(book, ("s",), (100,)) == "record"
    book.graphs[("s",)][1].busy = True
    assert _call(book, ("s",), (100,)) == "plain"  # both hold results: never overwritten
    first.busy = False
    assert _call(book, ("s",), (100,)) == "replay"


def test_an_input_that_moves_is_copied_from_then_on() -> None:
    """An activation that happened to come back at the same address is pinned; once it
    moves, the graph is re-recorded copying it, and later moves record nothing."""
    book = _book()
    _call(book, ("s",), (100, 7))
    assert _call(book, ("s",), (100, 7)) == "record"  # 7 pinned by coincidence
    assert book.graphs[("s",)][0].pinned == ((0, 100), (1, 7))
    assert _call(book, ("s",), (100, 8)) == "record"  # it moved: re-recorded
    assert book.graphs[("s",)][-1].pinned == ((0, 100),)
    assert book.moved[("s",)] == {1}  # never pinned again, even back at one address
    kinds = [_call(book, ("s",), (100, a)) for a in (9, 9, 10, 11)]
    assert kinds == ["replay"] * 4
    assert book.records[("s",)] == 2


def test_an_input_a_plain_run_moved_is_pinned_where_it_ended() -> None:
    """Packed parameters move the weights into one buffer during the first (plain) call:
    the recording compares with the addresses after that call, so the weights are read
    in place, not copied at every replay."""
    book = _book()
    assert _call(book, ("s",), (100, 1)) == "plain"
    book.ran(("s",), (500, 1))  # the weight moved to 500 while the call ran
    d = book.choose(("s",), (500, 2))
    assert d.kind == "record" and d.stable == (True, False)
    book.ran(("t",), (1, 2))  # a key never chosen is not remembered
    assert ("t",) not in book.previous


def test_a_packed_input_that_moved_is_packed_again_by_a_plain_run_then_pinned() -> None:
    """A parameter of a packed buffer replaced by the user: the call runs plainly (the
    packing moves it into a new buffer) and the next records it read in place, where a
    moved activation is copied from then on."""
    book = GraphBook(8, 2, 8, 1024, packed_inputs=frozenset({0}))
    _call(book, ("s",), (100, 1))
    assert _call(book, ("s",), (100, 2)) == "record"  # the weight pinned, the activation not
    assert _call(book, ("s",), (300, 3)) == "plain"  # the weight replaced: packed again
    book.ran(("s",), (600, 3))  # where the plain run packed it
    d = book.choose(("s",), (600, 4))
    assert d.kind == "record" and d.stable == (True, False)
    assert 0 not in book.moved[("s",)]


def test_a_packed_input_replaced_before_the_first_recording_is_packed_again_first() -> None:
    """Replaced between the first (packing) call and the second: not recorded as a copy
    (the capture would then concatenate the copies at every replay)."""
    book = GraphBook(8, 2, 8, 1024, packed_inputs=frozenset({0}))
    _call(book, ("s",), (100, 1))
    book.ran(("s",), (500, 1))  # packed during the first call
    assert _call(book, ("s",), (700, 2)) == "plain"  # replaced since: packed again
    book.ran(("s",), (900, 2))
    d = book.choose(("s",), (900, 3))
    assert d.kind == "record" and d.stable == (True, False)
    assert book.records[("s",)] == 1


def test_keys_that_vary_more_than_the_graphs_kept_stop_recording() -> None:
    """A decode loop meets each cache length once per call of generate: after as many
    graphs were dropped as are kept, new lengths run plainly, recorded ones replay."""
    book = _book(max_graphs=4)
    kinds = []
    for _ in range(3):  # three calls of generate over the same 10 lengths
        kinds += [_call(book, ("len", n), (100, 1)) for n in range(10)]
    first, second, third = kinds[:10], kinds[10:20], kinds[20:]
    assert first == ["plain"] * 10
    assert second.count("record") == 8 and book.evictions == 4  # 4 kept, 4 dropped
    assert "record" not in third
    assert third.count("replay") == 4  # the lengths still kept


def test_recording_stops_after_max_records() -> None:
    """Inputs pinned by coincidence that move one after another: each costs a
    recording, up to `max_records`; then the plain launches run."""
    book = _book(max_records=3)
    pointers = [10, 20, 30, 40, 50, 60]
    kinds = [_call(book, ("s",), tuple(pointers)), _call(book, ("s",), tuple(pointers))]
    for i in range(4):
        pointers[i] += 1  # one more input moves
        kinds.append(_call(book, ("s",), tuple(pointers)))
    assert kinds == ["plain", "record", "record", "record", "plain", "plain"]
