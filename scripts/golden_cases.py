"""The case writer the op golden scripts share (make_pool_goldens.py,
make_interpolate_goldens.py): each case runs y = fn(x), backward with a
random grad_y, and records x, grad_y, y and grad_x under "case<i>.<name>"
with its metadata as strings under "case<i>.<key>"."""
import torch


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
