"""The fusion report and picture (issue 21 items 10-12 and 14): the cost model's GPU (the
device's when fuseopt knows it, else said to be assumed), what runs each route, the rows
outside groups named for what they are, one section per compiled graph with its eager
fallbacks, and `compiled.fusion_graph(path)` (DOT, or SVG/PNG through Graphviz)."""

from __future__ import annotations

import re
import stat
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from test_frontend_common import MLP, randn, randomize

import fuseopt
from fuseopt import api
from fuseopt.passes.nn_fuse.cost_model import H100
from fuseopt.passes.nn_fuse.gpu_specs import H100_SXM, KNOWN_GPUS, known_gpu, spec_of
from fuseopt.passes.nn_fuse.report import (
    LIBRARY,
    PER_OP,
    ReportTarget,
    build_report,
    fusion_report,
    graphs_dot,
)

ROUTES = """
func.func @routes(%x: tensor<128x1024xbf16>, %w: tensor<1024x256xbf16>, %r: tensor<128x256xbf16>, %y: tensor<16384x256xbf16>, %w2: tensor<256x1024xbf16>, %z: tensor<8192x8192xbf16>, %w3: tensor<8192x8192xbf16>) -> (tensor<128x256xbf16>, tensor<16384x1024xbf16>, tensor<8192x8192xbf16>) {
  %t = nn.matmul %x, %w : tensor<128x1024xbf16>, tensor<1024x256xbf16> -> tensor<128x256xbf16>
  %o = nn.add %t, %r : tensor<128x256xbf16>
  %m = nn.matmul %y, %w2 : tensor<16384x256xbf16>, tensor<256x1024xbf16> -> tensor<16384x1024xbf16>
  %mr = nn.relu %m : tensor<16384x1024xbf16>
  %l = nn.matmul %z, %w3 : tensor<8192x8192xbf16>, tensor<8192x8192xbf16> -> tensor<8192x8192xbf16>
  %la = nn.add %l, %z : tensor<8192x8192xbf16>
  %lr = nn.relu %la : tensor<8192x8192xbf16>
  func.return %o, %mr, %lr : tensor<128x256xbf16>, tensor<16384x1024xbf16>, tensor<8192x8192xbf16>
}
"""
"""Every route: a bypassed tiny GEMM (its add left alone too), a generated GEMM kernel,
a library GEMM with a fused epilogue (filecheck/passes/nn-fuse.mlir's @routes)."""


@pytest.fixture(autouse=True)
def _fresh_dynamo() -> None:
    torch._dynamo.reset()


@pytest.fixture
def fake_gpu(monkeypatch: pytest.MonkeyPatch) -> list[SimpleNamespace]:
    """PyTorch's CUDA device queries answering for the GPU appended to the list."""
    gpus: list[SimpleNamespace] = []
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device=None: gpus[-1])
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: gpus[-1].name)
    return gpus


# --- the GPU table (item 10) ---


@pytest.mark.parametrize(
    ("device_name", "model"),
    [
        ("NVIDIA H100 80GB HBM3", "H100 SXM 80GB"),
        ("NVIDIA H100 PCIe", "H100 PCIe 80GB"),
        ("NVIDIA H200", "H200 SXM 141GB"),
        ("NVIDIA GH200 480GB", "GH200 96GB"),
        ("NVIDIA A100-SXM4-80GB", "A100 SXM4 80GB"),
        ("NVIDIA A100-PCIE-40GB", "A100 40GB"),
        ("NVIDIA L4", "L4"),
        ("NVIDIA L40S", "L40S"),
        ("NVIDIA GeForce RTX 4090", "GeForce RTX 4090"),
        ("Tesla T4", "T4"),
        ("NVIDIA A10G", None),
        ("NVIDIA B200", None),
    ],
)
def test_known_gpus_by_device_name(device_name: str, model: str | None) -> None:
    """The names PyTorch reports map to their datasheet entry (None: not in the table)."""
    sheet = known_gpu(device_name)
    assert (sheet.name if sheet else None) == model


def test_datasheets_scale_like_the_measured_h100() -> None:
    """The H100 SXM entry gives the default (measured) model itself; the others scale
    their datasheet peaks by the same measured fractions, with the device's SM count."""
    assert spec_of(H100_SXM) == H100
    h200 = spec_of(known_gpu("NVIDIA H200"))  # type: ignore[arg-type]
    assert h200.hbm_bytes_per_s == pytest.approx(H100.hbm_bytes_per_s * 4800 / 3350)
    assert h200.matmul_flops_per_s_16bit == H100.matmul_flops_per_s_16bit
    l4 = spec_of(known_gpu("NVIDIA L4"), sm_count=60)  # type: ignore[arg-type]
    assert l4.sm_count == 60 and l4.hbm_bytes_per_s < H100.hbm_bytes_per_s / 5
    assert len({g.name for g in KNOWN_GPUS}) == len(KNOWN_GPUS)


# --- the report's target: device, cost model, what runs each route (items 10, 11) ---


def test_report_on_cpu_names_the_cpu_and_the_assumed_model() -> None:
    """On a CPU the report keeps the H100 model and says it is assumed, naming the CPU."""
    target = api.report_target("triton", torch.device("cpu"))
    assert target.gpu == H100
    assert target.basis.startswith("assumed: the compile device is a CPU, ")
    assert api._cpu_name() in target.basis
    assert "Triton's CPU interpreter" in target.generated
    assert target.library == "torch.matmul on the CPU"
    compiled = fuseopt.compile(randomize(MLP()), randn(2, 8), backend="interpret")
    assert compiled.device == torch.device("cpu")
    line = compiled.fusion_report().splitlines()[2]
    assert line.startswith("cost model: H100 SXM 80GB (assumed: the compile device is a CPU, ")


def test_report_on_a_known_gpu_takes_its_figures(fake_gpu: list[SimpleNamespace]) -> None:
    """On a GPU in the table the model is that GPU's (with the device's SM count), and
    the report says nn-fuse chose the routes with its own (H100) model."""
    fake_gpu.append(SimpleNamespace(name="NVIDIA A100-SXM4-80GB", multi_processor_count=108))
    target = api.report_target("triton", torch.device("cuda", 0))
    assert target.gpu.name == "A100 SXM4 80GB" and target.gpu.sm_count == 108
    assert target.basis == "the compile device, NVIDIA A100-SXM4-80GB"
    assert (target.generated, target.library) == ("Triton kernel", "cuBLAS via torch")
    text = fusion_report(fuseopt.run_pipeline(fuseopt.parse(ROUTES), "nn-fuse"), target)
    assert text.startswith("cost model: A100 SXM4 80GB (the compile device, NVIDIA A100-SXM4-80GB)")
    assert "nn-fuse chose the routes with its H100 SXM 80GB model" in text
    assert "est. us on the A100 SXM4 80GB model" in text
    assert "routes (triton backend on NVIDIA A100-SXM4-80GB):" in text
    assert "library_gemm  GEMM by cuBLAS via torch, then one Triton kernel for the epilogue" in text


def test_report_on_an_unknown_gpu_says_what_it_assumed(fake_gpu: list[SimpleNamespace]) -> None:
    fake_gpu.append(SimpleNamespace(name="NVIDIA B200", multi_processor_count=148))
    target = api.report_target("cuda", torch.device("cuda"))
    assert target.gpu.sm_count == 148 and target.gpu.hbm_bytes_per_s == H100.hbm_bytes_per_s
    assert target.basis == (
        "assumed: NVIDIA B200 is not in fuseopt's GPU table, so H100 SXM 80GB figures with "
        "its 148 SMs"
    )
    assert target.generated == "CUDA C++ kernel"


def test_compiled_report_on_a_gpu_models_that_gpu(fake_gpu: list[SimpleNamespace]) -> None:
    """The compiled model's report uses the device of its calls."""
    compiled = fuseopt.compile(randomize(MLP()), randn(2, 8), backend="interpret")
    fake_gpu.append(SimpleNamespace(name="NVIDIA L4", multi_processor_count=58))
    compiled.device = torch.device("cuda", 0)
    report = compiled.fusion_report()
    assert "cost model: L4 (the compile device, NVIDIA L4): 269 GB/s HBM" in report
    assert "est. us on the L4 model" in report


def test_rows_outside_groups_are_named_for_what_runs_them() -> None:
    """No `eager` row: matmuls left outside groups are library GEMMs, the other ops one
    generated kernel each; the legend says what runs every route that appears."""
    module = fuseopt.run_pipeline(fuseopt.parse(ROUTES), "nn-fuse")
    (rep,) = build_report(module)
    assert [(r.name, r.route, r.fused) for r in rep.rows] == [
        ("fused_0_matmul_relu", "kernel", True),
        ("fused_1_matmul_add_relu", "library_gemm", True),
        ("library GEMMs", LIBRARY, False),
        ("unfused ops", PER_OP, False),
    ]
    assert rep.rows[2].ops == ("nn.matmul",) and rep.rows[3].ops == ("nn.add",)
    text = fusion_report(module, ReportTarget(where="cuda backend", library="cuBLAS via torch"))
    assert "eager" not in text
    legend = text[text.index("routes (cuda backend):") :].splitlines()
    assert [line.split()[0] for line in legend[1:]] == [
        "kernel",
        "library_gemm",
        "library",
        "per_op",
    ]
    assert "library       GEMM alone by cuBLAS via torch" in text


# --- per-graph sections (item 12) and eager fallbacks (item 11) ---


def _sections(report: str) -> dict[str, str]:
    """The report's graph sections by graph name."""
    parts = re.split(r"^== graph (\w+): [^=]+ ==$", report, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_report_has_a_section_per_compiled_graph() -> None:
    """Training forward, backward and a later no_grad call: three graphs, each with its
    own tables and kernels, and the header says which were compiled."""
    compiled = fuseopt.compile(randomize(MLP()), backend="interpret")
    x = randn(2, 8)
    compiled(x.requires_grad_(True)).sum().backward()
    with torch.no_grad():
        compiled(randn(2, 8))
    report = compiled.fusion_report()
    graphs = [g.name for g in compiled.graphs]
    assert graphs == ["forward0", "backward1", "inference2"], report
    assert "fuseopt (interpret backend): 3 graph(s), 3 region(s)" in report
    assert (
        "graphs compiled: forward0 (training forward), backward1 (training backward), "
        "inference2 (inference)" in report
    )
    sections = _sections(report)
    assert list(sections) == graphs
    for graph in compiled.graphs:
        section = sections[graph.name]
        assert f"nn-fuse report for @{graph.name}_" in section
        assert all(f"@{other}_" not in section for other in graphs if other != graph.name)
        assert all(f"  {k.region}/{k.name} " in section for k in graph.kernels)
        assert "eager fallback (ops left to PyTorch): none" in section
    assert "compiled with gradients on (outside torch.no_grad())" in sections["forward0"]
    assert "compiled without gradients" in sections["inference2"]


def test_eager_fallbacks_are_listed_in_their_graph() -> None:
    """Ops fuseopt's frontend left to PyTorch (a convolution) are listed apart from the
    library GEMMs, in the section of the graph they belong to, beside the regions
    compiled around them."""

    def conv_sandwich(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return torch.exp(torch.nn.functional.conv1d(torch.relu(x), w))

    compiled = fuseopt.compile(conv_sandwich, (randn(2, 4, 8), randn(4, 4, 3)), backend="interpret")
    report = compiled.fusion_report()
    (fallback,) = compiled.fallbacks
    assert fallback.target == "aten.convolution.default"
    assert "1 op(s) run eagerly (left to PyTorch)" in report.splitlines()[0]
    (section,) = _sections(report).values()
    assert section.count("nn-fuse report for @") == len(compiled.regions) == 2
    assert "eager fallback (ops left to PyTorch): 1" in section
    assert f"  {fallback.graph}: aten.convolution.default at {fallback.location}: " in section


# --- fusion_graph (item 14) ---


@pytest.fixture(scope="module")
def two_graphs() -> api.CompiledModule:
    """An MLP compiled for training (forward) and then for inference."""
    torch._dynamo.reset()
    compiled = fuseopt.compile(randomize(MLP()), randn(2, 8), backend="interpret")
    with torch.no_grad():
        compiled(randn(2, 8))
    return compiled


def _check_dot(text: str) -> None:
    """A light parse of the DOT text fusion_dot writes: balanced clusters, every line a
    statement, every edge between declared nodes."""
    assert text.startswith("digraph fusion {\n") and text.endswith("}\n")
    nodes: set[str] = set()
    depth = 0
    for line in text.splitlines()[1:]:
        line = line.strip()
        if m := re.fullmatch(r'(n\d+) \[label=".*", shape=(box|ellipse)\];', line):
            nodes.add(m[1])
        elif m := re.fullmatch(r'(n\d+) -> (n\d+) \[label=".*"\];', line):
            assert {m[1], m[2]} <= nodes
        elif re.fullmatch(r"subgraph cluster_\w+ \{", line):
            depth += 1
        elif line == "}":
            depth -= 1
        else:
            assert re.fullmatch(r"(node \[.*\]|label=.*);", line), line
    assert depth == -1  # the digraph's own closing brace


def test_fusion_graph_writes_dot_of_every_graph(
    two_graphs: api.CompiledModule, tmp_path: Path
) -> None:
    path = two_graphs.fusion_graph(tmp_path / "groups.dot")
    text = path.read_text()
    _check_dot(text)
    assert 'label="forward0 (training forward)";' in text
    assert 'label="inference1 (inference)";' in text
    for region in two_graphs.regions:
        assert f'label="@{region.func_name}";' in text
    groups = re.findall(r'label="(fused_\d+_\w+) \(matmul, kernel\)"', text)
    assert len(groups) == len(two_graphs.kernels) == 4  # two GEMM groups per region
    assert two_graphs.fusion_graph(str(tmp_path / "g.gv")).read_text() == text


def test_fusion_graph_svg_without_graphviz_is_a_clear_error(
    two_graphs: api.CompiledModule, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(api.shutil, "which", lambda name: None)
    target = tmp_path / "groups.svg"
    with pytest.raises(fuseopt.CompileError, match="Graphviz's `dot` on PATH") as info:
        two_graphs.fusion_graph(target)
    assert f"fusion_graph('{tmp_path / 'groups.dot'}')" in str(info.value)
    assert not target.exists()


def test_fusion_graph_renders_svg_and_png_with_dot(
    two_graphs: api.CompiledModule, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rendering runs `dot -T<format> -o <path>` on the DOT text (a stand-in `dot` on
    PATH records what it was given)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "dot"
    fake.write_text(
        f"#!{sys.executable}\n"
        "import sys\n"
        "fmt, out = sys.argv[1], sys.argv[3]\n"
        "open(out, 'w').write(fmt + '\\n' + sys.stdin.read())\n"
    )
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", str(bin_dir))
    for suffix in ("svg", "png"):
        out = two_graphs.fusion_graph(tmp_path / f"groups.{suffix}")
        fmt, _, dot = out.read_text().partition("\n")
        assert fmt == f"-T{suffix}"
        _check_dot(dot)


def test_fusion_graph_errors(two_graphs: api.CompiledModule, tmp_path: Path) -> None:
    with pytest.raises(fuseopt.ConfigurationError, match=r"renders \.svg, \.png"):
        two_graphs.fusion_graph(tmp_path / "groups.pdf")
    with pytest.raises(fuseopt.CompileError, match="nothing compiled yet"):
        fuseopt.compile(MLP(), backend="interpret").fusion_graph(tmp_path / "g.dot")
    with pytest.raises(fuseopt.CompileError, match="cannot write"):
        two_graphs.fusion_graph(tmp_path / "missing" / "g.dot")


def test_graphs_dot_keeps_clusters_apart() -> None:
    """The same module drawn in two graphs: node ids and cluster names stay unique."""
    module = fuseopt.run_pipeline(fuseopt.parse(ROUTES), "nn-fuse")
    text = graphs_dot([("a", [module]), ("b", [module])])
    _check_dot(text)
    clusters = re.findall(r"subgraph (cluster_\w+)", text)
    assert len(clusters) == len(set(clusters)) == 2 + 2 + 2 * 2
