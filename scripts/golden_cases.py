"""What the op golden scripts share: the case writer (make_pool_goldens.py,
make_interpolate_goldens.py), where each case runs y = fn(x), backward with
a random grad_y, and records x, grad_y, y and grad_x under "case<i>.<name>"
with its metadata as strings under "case<i>.<key>"; random integer tensors
holding their dtype's ends (make_where_goldens.py,
make_masked_fill_goldens.py)."""
import torch


def int_tensor(dt, shape, gen):
    """Random elements of integer dtype dt, its minimum first and its maximum
    last when there are three elements or more."""
    info = torch.iinfo(dt)
    x = torch.randint(-1000, 1000, shape, generator=gen, dtype=torch.int64)
    x = x.clamp(info.min, info.max).to(dt)
    flat = x.view(-1)
    if flat.numel() >= 3:
        flat[0], flat[-1] = info.min, info.max
    return x


class Writer:
    def __init__(self):
        self.tensors, self.meta, self.n = {}, {}, 0

    def case(self, x, fn, meta):
        """Runs y = fn(x), backward with a random grad_y, records them."""
        k = "case%d" % self.n
        self.n += 1
        x = x.detach().requires_grad_(True)
        y = fn(x)
        gy = torch.randn(*y.shape, dtype=torch.float64).to(x.dtype)
        (y * gy).sum().backward()
        self.tensors.update({k + ".x": x.detach(), k + ".grad_y": gy, k + ".y": y.detach(),
                             k + ".grad_x": x.grad})
        self.meta.update({k + "." + a: str(b) for a, b in meta.items()})
