"""One process driving two GPUs: a liger kernel launches in its tensors'
device's context whatever device is current, each device loads its own
modules, and the caller's current device is left as it was. Skips (and says
so) on a machine with fewer than 2 GPUs."""

import pytest

torch = pytest.importorskip("torch", reason="needs PyTorch")
if torch.cuda.device_count() < 2:
    pytest.skip("needs 2 CUDA GPUs (this machine has %d)" % torch.cuda.device_count(),
                allow_module_level=True)
from liger import ops  # noqa: E402


pytestmark = pytest.mark.usefixtures("ops_bundles")


def reference(x, w):
    x64 = x.double()
    y = (x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype).double()
    return y * w.double()


@pytest.mark.parametrize("current", [0, 1])
def test_kernels_run_on_their_tensors_device(current):
    torch.cuda.set_device(current)
    for dev in (1, 0, 1):  # alternating: a module per device's context
        x = torch.randn(7, 1000, device="cuda:%d" % dev).to(torch.bfloat16)
        w = torch.randn(1000, device="cuda:%d" % dev).to(torch.bfloat16)
        y = ops.rms_norm(x, w)
        assert y.device == x.device
        torch.cuda.synchronize(dev)
        err = ((y.double() - reference(x, w)).abs().max() / reference(x, w).abs().max()).item()
        assert err < 1e-2, (dev, err)
        assert torch.cuda.current_device() == current  # the caller's device stays
    # And the current device's own work still runs in its context.
    a = torch.ones(4, device="cuda")
    assert a.sum().item() == 4.0
