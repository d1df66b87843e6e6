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
