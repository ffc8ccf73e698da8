"""The public API around the frontend: kernel records, `fusion_report()`, `save()`,
options and modes, the `torch_dynamo_backends` entry point, backend failures, and clear
errors for bad input (all with the interpret backend)."""

from __future__ import annotations

import importlib.metadata
import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from test_frontend_common import MLP, assert_close, randn, randomize
from xdsl.dialects.builtin import ModuleOp

import fuseopt
from fuseopt import api
from fuseopt.backends.contract import KernelRecord, describe_options
from fuseopt.diagnostics import BackendUnavailableError, ConfigurationError
from fuseopt.frontends.fx.errors import UnsupportedOpError


@pytest.fixture(autouse=True)
def _fresh_dynamo() -> None:
    torch._dynamo.reset()


@pytest.fixture(scope="module")
def compiled_mlp() -> tuple[torch.nn.Module, api.CompiledModule]:
    """An MLP compiled once (inference) for the record, report and save tests."""
    torch._dynamo.reset()
    model = randomize(MLP())
    with torch.no_grad():
        compiled = fuseopt.compile(model, randn(2, 8), backend="interpret")
    return model, compiled


def test_kernel_records(compiled_mlp: tuple[torch.nn.Module, api.CompiledModule]) -> None:
    """One record per nn-fuse group: matmul + bias + gelu, then matmul + bias + residual."""
    _, compiled = compiled_mlp
    kernels = compiled.kernels
    assert [k.schedule for k in kernels] == ["matmul", "matmul"], compiled.fusion_report()
    first, second = kernels
    assert {"nn.matmul", "nn.add", "nn.gelu"} <= set(first.ops)
    assert {"nn.matmul", "nn.add"} <= set(second.ops) and "nn.gelu" not in second.ops
    for k in kernels:
        assert k.region == compiled.regions[0].func_name
        assert k.suffix == ".mlir" and k.name.isidentifier()
        # the source is the group as a standalone function fuse-opt reads
        assert k.source and f"func.func @{k.name}(" in k.source
        fuseopt.parse(k.source)
    model, _ = compiled_mlp
    x = randn(2, 8, seed=5)
    w1, b1, w2, b2 = (p.detach() for p in model.parameters())
    (h,) = fuseopt.interpret(fuseopt.parse(first.source), first.name, x, w1, b1)
    with torch.no_grad():
        torch.testing.assert_close(torch.from_numpy(h), F.gelu(F.linear(x, w1, b1)))


def test_fusion_report(compiled_mlp: tuple[torch.nn.Module, api.CompiledModule]) -> None:
    """The report has the nn-fuse table of the region (bytes before/after), the kernels,
    and no fallbacks."""
    _, compiled = compiled_mlp
    report = compiled.fusion_report()
    assert "1 region(s), 2 kernel(s), 0 op(s) run eagerly" in report
    assert "nn-fuse report for @inference0_0" in report
    assert "graphs compiled: inference0 (inference)" in report  # under no_grad
    assert "HBM traffic saved" in report and "6 -> 2" in report  # eager kernels -> fused
    for k in compiled.kernels:
        assert k.name in report


def test_save(compiled_mlp: tuple[torch.nn.Module, api.CompiledModule], tmp_path: Path) -> None:
    """save() writes one source file per kernel beside index.md and index.json."""
    _, compiled = compiled_mlp
    index = compiled.save(tmp_path / "kernels")
    assert index.name == "index.md" and index.is_file()
    entries = json.loads((index.parent / "index.json").read_text())
    assert [e["kernel"] for e in entries] == [k.name for k in compiled.kernels]
    for e, k in zip(entries, compiled.kernels, strict=True):
        assert (index.parent / e["file"]).read_text() == k.source
        assert e["file"].endswith(".mlir") and e["file"] in index.read_text()
    with pytest.raises(fuseopt.CompileError, match="nothing compiled yet"):
        fuseopt.compile(MLP(), backend="interpret").save(tmp_path / "empty")
    with pytest.raises(fuseopt.CompileError, match="cannot save kernels"):
        compiled.save(index)  # a file, not a directory


def test_save_names_are_sanitized_and_shared(tmp_path: Path) -> None:
    """Hostile kernel names never escape the directory; equal sources share a file."""
    compiled = fuseopt.compile(MLP(), backend="interpret")
    evil = KernelRecord("../../evil name", ("nn.add",), "pointwise", "SRC", "/../x", "", "r")
    compiled.record.kernels.extend([evil, KernelRecord("k2", (), "pointwise", "SRC", ".py")])
    compiled.record.kernels.append(KernelRecord("gemm", ("nn.matmul",), "library_gemm"))
    compiled.save(tmp_path)
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["index.json", "index.md", "r_.._.._evil_name.txt"]
    entries = json.loads((tmp_path / "index.json").read_text())
    assert entries[0]["file"] == entries[1]["file"] and entries[2]["file"] is None


def test_pipeline_option_passes_through() -> None:
    """Backend options reach the backend: without nn-fuse every op is its own kernel;
    the report then runs nn-fuse on the frontend's own copy of the imported IR."""
    compiled = fuseopt.compile(
        randomize(MLP()), randn(2, 8), backend="interpret", pipeline="nn-decompose,cse"
    )
    assert compiled.kernels and {k.schedule for k in compiled.kernels} == {"unfused"}
    assert compiled.regions[0].compiled.fused_module is None
    assert isinstance(compiled.regions[0].imported, ModuleOp)
    assert "fused_0_matmul" in compiled.fusion_report()


def test_torch_compile_entry_point_and_options() -> None:
    """`fuseopt` is a torch_dynamo_backends entry point; options and errors go through."""
    names = [e.name for e in importlib.metadata.entry_points(group="torch_dynamo_backends")]
    assert "fuseopt" in names and "fuseopt" in torch._dynamo.list_backends()
    model = randomize(MLP())
    bad = torch.compile(model, backend="fuseopt", options={"backend": "interpret", "bogus": 1})
    with pytest.raises(Exception, match="has no option.*'bogus'"), torch.no_grad():
        bad(randn(2, 8))


@pytest.mark.parametrize("backend", ["triton", "cuda"])
def test_option_errors_list_each_option_once(backend: str) -> None:
    """An unknown option's error lists the backend's options once each: `block_cols`,
    not `block-cols, block_cols` (issue 21 item 13); a note says '-' may replace '_'."""
    if backend not in api.available_backends():
        pytest.skip(f"backend {backend} is not available here")
    with pytest.raises(ConfigurationError, match="has no option") as info:
        fuseopt.compile(MLP(), randn(2, 8), backend=backend, bogus=3)
    listing = str(info.value).split("(its options: ", 1)[1]
    names, _, note = listing.partition("; ")
    names_list = names.split(", ")
    assert len(names_list) == len(set(names_list))
    assert "block_cols" in names_list and "block-cols" not in names_list
    assert "mode" in names_list and "precision" in names_list
    assert note.startswith("'-' may replace '_'")


def test_describe_options_names_each_option_once() -> None:
    """Both spellings of a name make one entry; the note names the exceptions."""
    assert describe_options({"pipeline", "precision", "mode"}) == "mode, pipeline, precision"
    assert describe_options({"block-rows", "block_rows", "mode"}) == (
        "block_rows, mode; '-' may replace '_'"
    )
    assert describe_options({"block-m", "block_m", "cache_dir"}) == (
        "block_m, cache_dir; '-' may replace '_' (not in cache_dir)"
    )


def test_backend_errors() -> None:
    """Unknown or unavailable backends, bad modes, options and models: clear errors."""
    with pytest.raises(BackendUnavailableError, match="unknown backend 'nope'"):
        fuseopt.compile(MLP(), backend="nope")
    with pytest.raises(ConfigurationError, match="unknown mode 'fast'"):
        fuseopt.compile(MLP(), backend="interpret", mode="fast")
    with pytest.raises(fuseopt.CompileError, match="nn.Module or a function"):
        fuseopt.compile(42, backend="interpret")
    with pytest.raises(ConfigurationError, match="has no option.*'bogus'"):
        fuseopt.compile(MLP(), randn(2, 8), backend="interpret", bogus=3)
    with pytest.raises(ConfigurationError, match="bad pass pipeline"):
        fuseopt.compile(MLP(), randn(2, 8), backend="interpret", pipeline="no-such-pass")
    with pytest.raises(ConfigurationError, match="'attention' must be one of fused, nn, eager"):
        fuseopt.compile(MLP(), randn(2, 8), backend="interpret", attention="flash")
    with pytest.raises(ConfigurationError, match="'strict' must be"):
        fuseopt.compile(MLP(), randn(2, 8), backend="interpret", strict="yes")
    for name in ("triton", "cuda"):
        try:
            fuseopt.compile(MLP(), backend=name)
        except BackendUnavailableError as e:
            assert "not available" in str(e)


class _BrokenBackend:
    """A backend that fails on every region (a stand-in for a backend bug)."""

    def compile(self, module: ModuleOp, func_name: str, options: Mapping[str, Any]) -> Any:
        raise RuntimeError("boom\nsecond line")


def test_backend_failure_falls_back(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A backend that fails runs the region eagerly (logged); strict=True raises."""
    monkeypatch.setitem(api.BACKENDS, "broken", _BrokenBackend)
    model = randomize(MLP())
    x = randn(2, 8)
    with caplog.at_level(logging.WARNING, logger="fuseopt"), torch.no_grad():
        compiled = fuseopt.compile(model, backend="broken")
        assert_close(compiled(x), model(x))
    assert compiled.fallbacks and not compiled.kernels
    assert all(
        "backend 'broken' failed (RuntimeError: boom)" in f.reason for f in compiled.fallbacks
    )
    assert len([r for r in caplog.records if r.name == "fuseopt"]) == 1
    torch._dynamo.reset()
    strict = fuseopt.compile(model, backend="broken", strict=True)
    with pytest.raises(Exception, match="boom"), torch.no_grad():
        strict(x)


def test_export_errors() -> None:
    """export: an op outside the table is kept as a located nn.torch_call; one that
    cannot be kept (a float64 result) is a located error; uncapturable input is clear."""

    def conv(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return F.conv1d(torch.relu(x), w)

    text = fuseopt.export(conv, (randn(1, 2, 8), randn(3, 2, 3)))
    (call,) = [line for line in text.splitlines() if "nn.torch_call" in line]
    assert '"aten.conv1d.default"' in call, text

    def widen(x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x).double() * 2

    with pytest.raises(UnsupportedOpError, match="cannot be kept as a call") as info:
        fuseopt.export(widen, (randn(2, 3),))
    assert info.value.location is not None and info.value.location.file == __file__
    assert "test_frontend_api.py:" in str(info.value)
    with pytest.raises(fuseopt.CompileError, match="could not capture"):
        fuseopt.export(MLP(), "not a tensor")


def test_export_roundtrips_through_parse() -> None:
    """export's text parses back (fuse-opt reads it) and interprets like eager."""
    model = randomize(MLP())
    x = randn(3, 8)
    module = fuseopt.parse(fuseopt.export(model, x))
    params = [p.detach() for p in model.parameters()]
    (out,) = fuseopt.interpret(module, "forward", *params, x)
    with torch.no_grad():
        torch.testing.assert_close(torch.from_numpy(out), model(x), rtol=2e-5, atol=2e-5)


def test_imported_ops_are_located() -> None:
    """Every imported nn op carries the source line of its FX node (here: this file)."""
    from xdsl.dialects.builtin import FileLineColLoc

    def fn(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        y = torch.softmax(x @ w, -1)
        return F.silu(y) * 2.0

    compiled = fuseopt.compile(fn, (randn(2, 8), randn(8, 4)), backend="interpret")
    (region,) = compiled.regions
    ops = [op for op in region.imported.walk() if op.name.startswith("nn.")]
    assert ops
    lines = set()
    for op in ops:
        assert isinstance(op.location, FileLineColLoc), op
        assert op.location.filename.data == __file__
        lines.add(op.location.line.data)
    first = fn.__code__.co_firstlineno
    assert lines == {first + 1, first + 2}


def test_many_compiled_modules_of_one_class() -> None:
    """Each CompiledModule has its own Dynamo cache: compiling instances of one class
    more often than Dynamo's recompile limit (8) still compiles every one."""
    for seed in range(9):
        model = randomize(torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Tanh()), seed)
        x = randn(2, 4, seed=seed)
        with torch.no_grad():
            compiled = fuseopt.compile(model, x, backend="interpret")
            assert_close(compiled(x), model(x))
        assert compiled.kernels, f"instance {seed} was not compiled"


def test_compiled_module_forwards_model_attributes(
    compiled_mlp: tuple[torch.nn.Module, api.CompiledModule],
) -> None:
    """The compiled model is used like the model: its attributes are the model's."""
    model, compiled = compiled_mlp
    assert list(compiled.parameters()) == list(model.parameters())
    assert compiled.up is model.up and compiled.training == model.training
    with pytest.raises(AttributeError):
        compiled.no_such_attribute  # noqa: B018


EXEC_SOURCE = """
import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(8, 8)

    def forward(self, x):
        return torch.relu(self.linear(x)) * 2

    def predict(self, x):
        return self(x).argmax(-1)
"""


def _exec_module() -> Any:
    """A module whose class comes from exec'd source (no importable module behind it)."""
    import types

    namespace = types.ModuleType("fuseopt_test_generated_source")
    exec(compile(EXEC_SOURCE, "<generated>", "exec"), namespace.__dict__)
    return randomize(namespace.Net())


def test_a_class_defined_by_exec_compiles() -> None:
    """As torch.compile does: Dynamo resolves the forward's globals through the entry
    point's, and never imports the class's (nonexistent) module."""
    model = _exec_module()
    x = randn(4, 8)
    with torch.no_grad():
        compiled = fuseopt.compile(model, x, backend="interpret")
        assert_close(compiled(x), model(x))
    assert compiled.kernels and not compiled.fallbacks


def test_the_model_s_own_methods_call_the_compiled_forward() -> None:
    """`compiled.predict(x)` (a method of the model's class) runs the compiled forward
    inside it; torch.nn.Module's methods stay the model's; the model is left as it was."""
    model = _exec_module()
    x = randn(4, 8)
    compiled = fuseopt.compile(model, backend="interpret")
    with torch.no_grad():
        assert torch.equal(compiled.predict(x), model.predict(x))
        assert compiled.kernels, "predict ran the uncompiled forward"
        assert_close(compiled.forward(x), model(x))
    assert getattr(model, "_compiled_call_impl", None) is None
    assert compiled.state_dict().keys() == model.state_dict().keys()


def test_shape_changes_do_not_hit_the_recompile_limit(caplog: pytest.LogCaptureFixture) -> None:
    """With torch.compile's default dynamic=None, twelve batch sizes make two graphs (the
    first size static, then one of a symbolic size, compiled once for every size), never
    Dynamo's recompile limit and its silent eager fallback."""
    model = randomize(torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.GELU()))
    compiled = fuseopt.compile(model, backend="interpret")
    with torch.no_grad(), caplog.at_level(logging.WARNING):
        for batch in range(1, 13):
            x = randn(batch, 4, seed=batch)
            assert_close(compiled(x), model(x))
    assert not [r for r in caplog.records if "recompile_limit" in r.getMessage()]
    assert len(compiled.record.graphs) == 2, compiled.record.graphs
    assert not compiled.fallbacks, [(f.target, f.reason) for f in compiled.fallbacks]
    with pytest.raises(ConfigurationError, match="dynamic must be"):
        fuseopt.compile(model, backend="interpret", dynamic="yes")


def test_each_compiled_module_starts_static(caplog: pytest.LogCaptureFixture) -> None:
    """Dynamo remembers the sizes it saw per code identity (file, line, name): entry
    points sharing one made every CompiledModule after the first in a process trace
    symbolic sizes from its first call (extra host work per call, symbolic ops run in
    PyTorch). Each CompiledModule's first shapes compile statically; its own second
    shape still makes it symbolic."""
    shapes = [(7, 9, 5), (11, 13, 3), (32, 4, 8)]
    with caplog.at_level(logging.INFO, logger="fuseopt"):
        for m, n, k in shapes:
            x, w = randn(m, k, seed=m), randn(n, k, seed=n)
            assert_close(
                fuseopt.compile(F.linear, (x, w), backend="interpret")(x, w), F.linear(x, w)
            )
        compiled = fuseopt.compile(torch.bmm, (randn(2, 3, 4), randn(2, 4, 5)), backend="interpret")
    symbolic = [r for r in caplog.records if "symbolic sizes" in r.getMessage()]
    assert not symbolic, symbolic[0].getMessage()
    with caplog.at_level(logging.INFO, logger="fuseopt"):
        a, b = randn(3, 5, 2), randn(3, 2, 6)
        assert_close(compiled(a, b), torch.bmm(a, b))
    assert [r for r in caplog.records if "symbolic sizes" in r.getMessage()]


def test_a_compiled_graph_runs_its_generated_code_directly(monkeypatch: pytest.MonkeyPatch) -> None:
    """The function handed back to AOTAutograd is the partitioned graph's generated
    `forward` itself, not the lazy graph module's wrapper that calls the module through
    `nn.Module`'s call path on every call (`dynamo_backend.generated_forward`)."""
    from torch.fx import GraphModule
    from torch.fx._lazy_graph_module import _LazyGraphModule

    from fuseopt.frontends.fx.dynamo_backend import generated_forward

    class AddOne(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + 1

    def lazy_module() -> GraphModule:
        gm = _LazyGraphModule(AddOne(), torch.fx.symbolic_trace(AddOne()).graph)
        gm.recompile()  # regenerated at its next call, as a backend receives it
        return gm

    forward, wrapper = generated_forward(lazy_module()), lazy_module().forward
    model = randomize(MLP())
    x = randn(4, 8)
    with torch.no_grad():
        compiled = torch.compile(model, backend="fuseopt")
        want = model(x)
        assert_close(compiled(x), want)  # compiled here, through any path

        def no_module_call(self: GraphModule, *args: Any, **kwargs: Any) -> Any:
            raise AssertionError("called through the module")

        monkeypatch.setattr(GraphModule, "__call__", no_module_call)
        torch.testing.assert_close(forward(x), x + 1)
        with pytest.raises(AssertionError, match="through the module"):
            wrapper(x)  # what the lazy module's `forward` would have done
        assert_close(compiled(x), want)  # the partitioned graph's code, called directly
