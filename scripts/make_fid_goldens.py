#!/usr/bin/python3
"""Writes tests/golden/fid.safetensors: fixed feature sets and their Fréchet
distances computed independently with torch, in f64.

For each case <c> the file holds
  <c>.a, <c>.b        features (n_a, d) and (n_b, d), f64
  <c>.mu_a, <c>.cov_a, <c>.mu_b, <c>.cov_b
                      torch.mean and torch.cov (unbiased, as numpy.cov)
  <c>.fid             0-d: |mu_a - mu_b|^2 + tr(S_a) + tr(S_b) - 2 tr((S_a S_b)^(1/2))
  <c>.mmd2, <c>.mmd2_k2
                      0-d: KID's unbiased squared MMD of a and b (tg_kernel_mmd2) with
                      the polynomial kernel (x.y / d + 1)^3 (torchmetrics' defaults),
                      and with (0.5 x.y - 0.25)^2, from full kernel matrices
The trace of the square root is computed as in pytorch-fid's intent but with
torch.linalg.eigh only: S_a^(1/2) = V diag(sqrt(max(w, 0))) V^T, then the
eigenvalues of the symmetric S_a^(1/2) S_b S_a^(1/2), clamped at 0, square
roots summed.  Cross-checked here against the non-symmetric route
(eigenvalues of S_a S_b, torch.linalg.eigvals) where both are well defined.
tests/test_fid.c requires tapegrad's value within 1e-6 relative.

Run from the repository root:
    /usr/bin/python3 scripts/make_fid_goldens.py
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

OUT = os.path.join("tests", "golden", "fid.safetensors")


def sqrtm_psd(s):
    w, v = torch.linalg.eigh(s)
    return (v * w.clamp(min=0).sqrt()) @ v.T


def frechet(mu_a, cov_a, mu_b, cov_b):
    r = sqrtm_psd(cov_a)
    m = r @ cov_b @ r
    m = 0.5 * (m + m.T)
    tr_sqrt = torch.linalg.eigvalsh(m).clamp(min=0).sqrt().sum()
    return ((mu_a - mu_b) ** 2).sum() + cov_a.trace() + cov_b.trace() - 2 * tr_sqrt


def mmd2(a, b, degree, gamma, coef):
    """The unbiased estimate: off-diagonal means within a and within b, minus
    twice the mean across (torchmetrics' maximum_mean_discrepancy for equal
    sizes, written for any)."""
    k = lambda x, y: (gamma * x @ y.T + coef) ** degree  # noqa: E731
    kaa, kbb, kab = k(a, a), k(b, b), k(a, b)
    m, n = a.shape[0], b.shape[0]
    return ((kaa.sum() - kaa.diag().sum()) / (m * (m - 1))
            + (kbb.sum() - kbb.diag().sum()) / (n * (n - 1)) - 2 * kab.mean())


def features(gen, n, d, rank, shift, scale):
    """Correlated features: n rows of shift + z A with A (rank, d), like
    ReLU activations (half of them clipped at 0)."""
    a = torch.randn(rank, d, generator=gen, dtype=torch.float64) * scale
    z = torch.randn(n, rank, generator=gen, dtype=torch.float64)
    return (shift + z @ a).clamp(min=0)


def main():
    gen = torch.Generator().manual_seed(29)
    cases = {
        # full-rank covariances, different sizes and means
        "full": (features(gen, 400, 16, 16, 0.3, 0.5), features(gen, 300, 16, 16, 0.1, 0.7)),
        # the feature size of tapegrad fid with fewer samples than features:
        # both covariances are singular (rank <= n - 1)
        "singular": (features(gen, 100, 128, 128, 0.2, 0.3),
                     features(gen, 90, 128, 128, 0.25, 0.3)),
        # low-rank structure at d = 48 with many samples
        "lowrank": (features(gen, 600, 48, 8, 0.5, 1.0), features(gen, 500, 48, 8, 0.4, 1.1)),
    }
    out = []
    for name, (a, b) in cases.items():
        mu_a, mu_b = a.mean(0), b.mean(0)
        cov_a, cov_b = torch.cov(a.T), torch.cov(b.T)
        fid = frechet(mu_a, cov_a, mu_b, cov_b)
        if name == "full":
            # the non-symmetric route: tr((S_a S_b)^(1/2)) = sum sqrt(eig(S_a S_b))
            ev = torch.linalg.eigvals(cov_a @ cov_b)
            alt = ((mu_a - mu_b) ** 2).sum() + cov_a.trace() + cov_b.trace() \
                - 2 * ev.sqrt().real.sum()
            assert abs(alt - fid) <= 1e-9 * abs(fid), (alt, fid)
        print(f"{name}: a {tuple(a.shape)}, b {tuple(b.shape)}, fid {fid.item():.12g}")
        out += [(f"{name}.a", a), (f"{name}.b", b), (f"{name}.mu_a", mu_a),
                (f"{name}.cov_a", cov_a), (f"{name}.mu_b", mu_b), (f"{name}.cov_b", cov_b),
                (f"{name}.fid", fid), (f"{name}.mmd2", mmd2(a, b, 3, 1.0 / a.shape[1], 1.0)),
                (f"{name}.mmd2_k2", mmd2(a, b, 2, 0.5, -0.25))]
    write_safetensors(OUT, out, {"script": "scripts/make_fid_goldens.py",
                                 "torch": torch.__version__})
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
