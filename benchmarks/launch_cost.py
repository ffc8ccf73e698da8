"""Host cost per kernel launch, measured on a region of many kernels.

    python -m benchmarks.launch_cost [--kernels 100] [--calls 300] [--systems ...] [--out FILE]

A compiled region's host work has a part paid once per call (argument handling,
allocations) and a part paid per launch. This benchmark separates them: it compiles two
nn functions, a chain of `--kernels` explicit `nn.fusion` groups (one kernel each: an
elementwise add on a 1x256 f32 tile) and the same chain of length one, and times the
host side of each call (perf_counter around the call, the GPU drained between calls so
a full launch queue never blocks it). The host cost per launch is the slope,
(host(N) - host(1)) / (N - 1); the kernels are tiny, so the GPU never limits it.

Systems: fuseopt per backend (and in mode="reduce-overhead"), eager PyTorch running the
same chain (`x + x`, one ATen launch per op), and `triton-floor`: a Triton kernel doing
the same add launched through its compiled launcher directly (`CompiledKernel.run`, what
fuseopt's fast path once called), no Python around it: the least a launch through
Triton's launcher costs; and `driver-floor`: the same kernel launched N times by one
call of fuseopt's C launch loop with every argument stored beforehand, so its slope is
about what `cuLaunchKernel` costs per launch on this host (plus the loop's own
nanoseconds; one function launched N times, where fuseopt launches N distinct ones),
what no host code can go below. It reads the kernel's launch parameters as the Triton
run form does, so it runs where that does (Triton 3.6). The output of every system is
checked against eager before it is timed. Needs a CUDA GPU.
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import sys
import time
from collections.abc import Callable

import torch

SHAPE = (1, 256)
"""The tile each kernel adds: tiny, so each kernel takes a few microseconds of GPU."""


def chain_source(kernels: int) -> str:
    """nn IR of `kernels` chained fusion groups, each `x + x` (one kernel per group)."""
    t = "tensor<" + "x".join(map(str, SHAPE)) + "xf32>"
    lines = [f"func.func @chain(%x: {t}) -> {t} {{"]
    previous = "%x"
    for i in range(kernels):
        lines += [
            f"  %v{i} = nn.fusion ins({previous} : {t}) -> {t} {{",
            f"  ^bb0(%a: {t}):",
            f"    %e = nn.add %a, %a : {t}",
            f"    nn.yield %e : {t}",
            "  }",
        ]
        previous = f"%v{i}"
    lines.append(f"  func.return {previous} : {t}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def eager_chain(kernels: int) -> Callable[[torch.Tensor], tuple[torch.Tensor]]:
    """The same chain in eager PyTorch."""

    def run(x: torch.Tensor) -> tuple[torch.Tensor]:
        for _ in range(kernels):
            x = x + x
        return (x,)

    return run


def triton_floor(kernels: int) -> Callable[[torch.Tensor], tuple[torch.Tensor]]:
    """`kernels` launches of one Triton add kernel through `CompiledKernel.run` alone."""
    add = _add_kernel()
    n = SHAPE[0] * SHAPE[1]
    compiled = None

    def run(x: torch.Tensor) -> tuple[torch.Tensor]:
        nonlocal compiled
        a, b = x.clone(), torch.empty_like(x)
        if compiled is None:
            compiled = add[(1,)](a, b, n)
            a, b = b, a
            a.copy_(x)
        launch, function, packed = compiled.run, compiled.function, compiled.packed_metadata
        stream = torch.cuda.current_stream().cuda_stream
        for _ in range(kernels):
            launch(1, 1, 1, stream, function, packed, None, None, None, a, b, n)
            a, b = b, a
        return (a,)

    return run


def driver_floor(kernels: int) -> Callable[[torch.Tensor], tuple[torch.Tensor]]:
    """`kernels` launches of the same Triton add kernel as one run of fuseopt's C launch
    loop with every argument stored beforehand: one call from Python, then
    `cuLaunchKernel` alone per launch (what the driver costs on this host)."""
    from fuseopt.backends.launch_loop import (
        LaunchRun,
        RunLaunch,
        c_launch_loop,
        cu_launch_kernel,
        raw_stream,
    )
    from fuseopt.backends.triton.host_runs import kernel_parameters

    loop = c_launch_loop()
    if loop is None:
        raise RuntimeError("no C compiler to build the launch loop")
    a, b = torch.empty(SHAPE, device="cuda"), torch.empty(SHAPE, device="cuda")
    compiled = _add_kernel()[(1,)](a, b, SHAPE[0] * SHAPE[1])
    function, threads, shared, trailing = kernel_parameters(compiled, 2, 0)
    address = ctypes.cast(cu_launch_kernel(), ctypes.c_void_p).value or 0
    one = RunLaunch(function, (1, 1, 1), threads, shared, 2, trailing)
    run = LaunchRun([one] * kernels, address, aligned=range(2 * kernels))
    for i in range(kernels):  # ping-pong: launch i reads one buffer, writes the other
        source, target = (a, b) if i % 2 == 0 else (b, a)
        run.values[2 * i : 2 * i + 2] = (source.data_ptr(), target.data_ptr())
    out = b if kernels % 2 else a

    def run_chain(x: torch.Tensor) -> tuple[torch.Tensor]:
        a.copy_(x)
        failed = loop(run.address, raw_stream(x.device.index or 0))
        if failed:
            raise RuntimeError(f"the launch loop failed: {failed}")
        return (out.clone(),)

    return run_chain


def _add_kernel():  # noqa: ANN202 - a Triton JIT function
    """The Triton kernel every floor launches: `y = x + x` over one tile."""
    import triton
    import triton.language as tl

    @triton.jit
    def add(x, y, n: tl.constexpr):
        offsets = tl.arange(0, n)
        v = tl.load(x + offsets)
        tl.store(y + offsets, v + v)

    return add


def make_system(name: str, kernels: int) -> Callable[[torch.Tensor], tuple[torch.Tensor, ...]]:
    """The callable `name` stands for, running a chain of `kernels` launches."""
    import fuseopt

    if name == "eager":
        return eager_chain(kernels)
    if name == "triton-floor":
        return triton_floor(kernels)
    if name == "driver-floor":
        return driver_floor(kernels)
    backend, _, mode = name.removeprefix("fuseopt-").partition(" ")
    return fuseopt.load_mlir(chain_source(kernels), backend=backend, mode=mode or None)


def host_us_per_call(fn: Callable, x: torch.Tensor, calls: int) -> float:
    """Median host time of one call, the GPU drained before each call."""
    for _ in range(5):
        fn(x)
    torch.cuda.synchronize()
    samples = []
    for _ in range(calls):
        start = time.perf_counter()
        fn(x)
        samples.append(time.perf_counter() - start)
        torch.cuda.synchronize()
    return statistics.median(samples) * 1e6


def measure(name: str, kernels: int, calls: int) -> dict:
    """Host time per call at 1 and `kernels` launches, and the slope per launch."""
    x = torch.randn(SHAPE, device="cuda") * 2.0**-kernels
    row: dict = {"system": name}
    for n in (1, kernels):
        fn = make_system(name, n)
        (got,) = fn(x)[:1]
        (want,) = eager_chain(n)(x)
        torch.testing.assert_close(got, want)
        row[n] = host_us_per_call(fn, x, calls)
    row["per_launch"] = (row[kernels] - row[1]) / (kernels - 1)
    return row


def main(argv: list[str] | None = None) -> int:
    """Run the systems and print (and optionally write) a Markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", type=int, default=100)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument(
        "--systems",
        default="eager,driver-floor,triton-floor,fuseopt-triton,fuseopt-cuda",
        help="comma-separated: eager, driver-floor, triton-floor, "
        "fuseopt-<backend>[ reduce-overhead]",
    )
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("launch_cost needs a CUDA GPU", file=sys.stderr)
        return 2
    if args.kernels < 2:
        parser.error("--kernels must be at least 2")
    import triton

    from benchmarks.machine import fuseopt_commit

    lines = [
        f"# Host cost per launch ({torch.cuda.get_device_name()})",
        "",
        f"torch {torch.__version__}, Triton {triton.__version__}; "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; fuseopt commit {fuseopt_commit()}",
        "",
        f"Host time per call (median of {args.calls}, us) of a chain of 1 and "
        f"{args.kernels} one-kernel groups; per launch = the slope.",
        "",
        f"| system | 1 kernel | {args.kernels} kernels | per launch |",
        "|---|---|---|---|",
    ]
    for name in args.systems.split(","):
        try:
            r = measure(name.strip(), args.kernels, args.calls)
        except Exception as e:  # noqa: BLE001 - a failing system is a row, not a crash
            lines.append(f"| {name} | FAILED: {type(e).__name__}: {str(e)[:80]} | | |")
            continue
        lines.append(f"| {name} | {r[1]:.1f} | {r[args.kernels]:.1f} | {r['per_launch']:.2f} |")
        print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
