"""What every benchmark here measures the same way: the median time of a
callable (triton.testing.do_bench: warm-up 25 ms, 200 ms of repeats,
events), and the two floors its figures are set beside, both measured in
the run that uses them: the device-to-device copy bandwidth and the bf16
matrix rate."""
import torch
from triton.testing import do_bench


def ms(fn, rep=200):
    return do_bench(fn, warmup=25, rep=rep, return_mode="median")


def copy_bandwidth():
    """GB/s of a 1 GiB device-to-device copy (read + write)."""
    n = 1 << 30
    a = torch.empty(n, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    t = ms(lambda: b.copy_(a))
    del a, b
    return 2 * n / t / 1e6


def matrix_rate():
    """TFLOP/s of an 8192³ bf16 torch.matmul."""
    a = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
    rate = 2 * 8192 ** 3 / ms(lambda: a @ b) / 1e9
    del a, b
    return rate


def measure_steps(impls, refs, floor_ms, rep=200, **labels):
    """A row per implementation (name -> a step returning its results, the
    tensors `refs` are of): its time, its fraction of `floor_ms`, the
    largest relative error of its results (norm of the difference over the
    reference's) and the peak memory one step allocates beyond what was
    allocated before it, GiB. `labels` go into every row."""
    rows = []
    for impl, step in impls.items():
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        got = step()
        torch.cuda.synchronize()
        peak = (torch.cuda.max_memory_allocated() - base) / 2 ** 30
        err = max(((g.double() - r.double()).norm() / r.double().norm()).item()
                  for g, r in zip(got, refs))
        del got
        tm = ms(step, rep=rep)
        rows.append(dict(labels, impl=impl, ms=tm, floor_ms=floor_ms, of_floor=floor_ms / tm,
                         err=err, peak_gib=peak))
    return rows


def interleaved_ratio(a, b, rounds=7, calls=5):
    """time(a) / time(b), each the time of one call among `calls` made in a
    row: the median over `rounds` rounds, each round timing a then b, and
    the rounds' ratios. The clock drifts with the card's heat over a run,
    so two rows timed seconds apart carry that drift into their ratio;
    alternating them leaves it out."""
    ratios = []
    for _ in range(rounds):
        ta, tb = (ms(lambda: [f() for _ in range(calls)], rep=100) / calls for f in (a, b))
        ratios.append(ta / tb)
    return sorted(ratios)[len(ratios) // 2], ratios


def print_rows(rows, first=()):
    """The rows of measure_steps as a table, the labels `first` leading."""
    print(" ".join("%-6s" % k for k in first) + "%-13s %9s %9s %8s %9s %10s" % (
        "impl", "ms", "floor ms", "of floor", "rel err", "peak GiB"))
    for r in rows:
        print(" ".join("%-6s" % r[k] for k in first) + "%-13s %9.3f %9.3f %7.0f%% %9.1e %10.2f" % (
            r["impl"], r["ms"], r["floor_ms"], 100 * r["of_floor"], r["err"], r["peak_gib"]))


def kernel_profile(step, top):
    """One more call of `step` under torch.profiler: its `top` GPU kernels by
    total time, as (name, ms, share of the call's kernel time, calls)."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    kernels = [e for e in prof.key_averages()
               if e.device_type == DeviceType.CUDA and e.device_time_total > 0]
    total = sum(e.device_time_total for e in kernels) or 1.0
    kernels.sort(key=lambda e: -e.device_time_total)
    return [(e.key, e.device_time_total / 1e3, e.device_time_total / total, e.count)
            for e in kernels[:top]]


def print_profile(rows, indent="    "):
    """kernel_profile's rows, one kernel a line."""
    for name, ms_, share, calls in rows:
        print("%s%8.3f ms %5.1f%% %5dx  %s" % (indent, ms_, 100 * share, calls, name[:100]),
              flush=True)


def profile_impls(impls, top):
    """kernel_profile of each implementation's step (name -> step), printed
    under its name; returns {name: rows}."""
    out = {}
    for impl, step in impls.items():
        out[impl] = kernel_profile(step, top)
        print("# %s: its %d GPU kernels of most time in one step" % (impl, top), flush=True)
        print_profile(out[impl])
    return out
