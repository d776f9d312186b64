#!/usr/bin/python3
"""DCGAN training step: tapegrad (bench/dcgan_step) against PyTorch, in one run.

Both sides run the same step on the same models (examples/dcgan/model.h):
fake = G(z); D step on bce(D(real), 1) + bce(D(fake.detach()), 0); G step on
bce(D(fake), 1); Adam(lr 2e-4, betas (0.5, 0.999)); same batch, same threads.
Each measurement is a fresh subprocess (so peak RSS is per implementation);
the two alternate for --rounds rounds, each first in turn, so that a busy
machine slows both alike; each ratio is also given within rounds (median and
range of the per-round ratios).
--omp-wait picks libgomp's OMP_WAIT_POLICY, which this PyTorch build reads
(tapegrad has its own thread pool and ignores it; its runs under
each policy are repeats of the same measurement): passive (idle workers sleep
at once: safe on a busy machine, but every parallel region then pays a thread
wake-up), active, inherit (the environment's; unset is libgomp's default,
spin a while then sleep), or both (the default): every round runs each side
under passive and under libgomp's default, and the summary gives the ratio
under each policy and with each side at its faster policy.
Prints images/s, peak RSS and their ratios, and whether our resident memory
is flat: the largest RSS sampled after each of steps N+1..2N within 5% of the
largest after steps 1..N (and the RSS after step 2N against after step N).  Targets are reported,
not asserted: >= 2x PyTorch's images/s, <= 1/4 of its peak RSS.
Both sides run on the OpenBLAS kernels tapegrad picks on this CPU
(benchlib.same_blas_kernels: PyTorch's Linear and ConvTranspose GEMMs are
OpenBLAS calls too).

    /usr/bin/python3 bench/dcgan_step.py --ours build-rel/bench/dcgan_step --threads 2
"""
import argparse
import glob
import json
import os
import resource
import statistics
import subprocess
import sys
import time

from benchlib import same_blas_kernels, torch_threads

HERE = os.path.dirname(os.path.abspath(__file__))


def rss_mib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def torch_worker(a):
    """The PyTorch step; prints one JSON line like bench/dcgan_step."""
    import torch
    from torch import nn
    sys.path.insert(0, os.path.join(HERE, "..", "examples"))
    from dcgan_torch import Generator

    torch_threads(torch, a.threads)
    baseline = rss_mib()   # the interpreter and torch itself, before any model

    class Discriminator(nn.Module):   # as in examples/dcgan/model.h
        def __init__(self, D=64):
            super().__init__()
            self.net = nn.Sequential(
                nn.Conv2d(1, D, 4, 2, 1), nn.LeakyReLU(0.2),
                nn.Conv2d(D, 2 * D, 4, 2, 1, bias=False), nn.BatchNorm2d(2 * D),
                nn.LeakyReLU(0.2), nn.Flatten(), nn.Linear(2 * D * 7 * 7, 1))

        def forward(self, x):
            return self.net(x)

    def init(m):
        if isinstance(m, (nn.Linear, nn.Conv2d, nn.ConvTranspose2d)):
            nn.init.normal_(m.weight, 0.0, 0.02)
        elif isinstance(m, nn.BatchNorm2d):
            nn.init.normal_(m.weight, 1.0, 0.02)
            nn.init.zeros_(m.bias)

    torch.manual_seed(0)
    g, d = Generator(), Discriminator()
    g.apply(init)
    d.apply(init)
    opt_g = torch.optim.Adam(g.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(d.parameters(), lr=2e-4, betas=(0.5, 0.999))
    bce = nn.BCEWithLogitsLoss()
    B = a.batch
    real = torch.rand(B, 1, 28, 28) * 2 - 1
    ones, zeros = torch.ones(B, 1), torch.zeros(B, 1)

    # --amp bf16: the forward passes under CPU autocast (f32 master weights)
    amp = dict(device_type="cpu", dtype=torch.bfloat16, enabled=a.amp == "bf16")

    def step():
        with torch.autocast(**amp):
            fake = g(torch.randn(B, 64))
        opt_d.zero_grad(set_to_none=True)
        with torch.autocast(**amp):
            loss_d = bce(d(real), ones) + bce(d(fake.detach()), zeros)
        loss_d.backward()
        opt_d.step()
        opt_g.zero_grad(set_to_none=True)
        with torch.autocast(**amp):
            loss_g = bce(d(fake), ones)
        loss_g.backward()
        opt_g.step()

    for _ in range(a.warmup):
        step()
    t0 = time.perf_counter()
    rss, max_half = [0, 0], [0, 0]
    for i in range(2 * a.steps):
        step()
        r, half = rss_mib(), int(i >= a.steps)
        max_half[half] = max(max_half[half], r)
        rss[half] = r
    secs = time.perf_counter() - t0
    print(json.dumps({
        "impl": "pytorch", "torch": torch.__version__, "amp": a.amp or "f32", "batch": B, "threads": a.threads,
        "steps": 2 * a.steps, "seconds": round(secs, 3),
        "images_per_s": round(2 * a.steps * B / secs, 2),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "rss_baseline_mib": round(baseline, 1), "rss_after_n_mib": round(rss[0], 1),
        "rss_after_2n_mib": round(rss[1], 1), "rss_max_first_n_mib": round(max_half[0], 1),
        "rss_max_second_n_mib": round(max_half[1], 1)}))


def run(cmd, env):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    return json.loads(out.strip().splitlines()[-1])


def find_ours():
    for c in sorted(glob.glob(os.path.join(HERE, "..", "build*", "bench", "dcgan_step"))):
        if os.access(c, os.X_OK):
            return c
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ours", help="path to bench/dcgan_step (default: build*/bench/dcgan_step)")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--steps", type=int, default=10, help="N: RSS is sampled after N and 2N")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--omp-wait", choices=["both", "passive", "active", "inherit"],
                    default="both",
                    help="OMP_WAIT_POLICY for both sides; both (default): passive and "
                         "libgomp's default, each round")
    ap.add_argument("--worker", choices=["torch"], help=argparse.SUPPRESS)
    ap.add_argument("--amp", choices=["bf16"], help=argparse.SUPPRESS)   # the torch worker's
    a = ap.parse_args()
    if a.worker:
        return torch_worker(a)
    ours = a.ours or find_ours()
    if not ours:
        sys.exit("bench/dcgan_step not found: build it (meson setup build-ex "
                 "-Dbuildtype=release && ninja -C build-ex) or pass --ours")
    tool = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(ours))), "tools",
                        "tapegrad")
    print(f"OpenBLAS kernels, both sides: {same_blas_kernels(tool)}", flush=True)
    common = ["--batch", str(a.batch), "--threads", str(a.threads), "--steps", str(a.steps),
              "--warmup", str(a.warmup)]
    policies = ["passive", "default"] if a.omp_wait == "both" else [a.omp_wait]
    envs = {}
    for pol in policies:
        env = dict(os.environ)
        if pol == "default":
            env.pop("OMP_WAIT_POLICY", None)
        elif pol != "inherit":
            env["OMP_WAIT_POLICY"] = pol.upper()
        envs[pol] = env
    res = {(name, pol): [] for name in ("tapegrad", "pytorch") for pol in policies}
    sides = [("tapegrad", [ours] + common),
             ("pytorch", [sys.executable, os.path.abspath(__file__), "--worker", "torch"] + common)]
    for r in range(a.rounds):
        for pol in policies:
            for name, cmd in sides if r % 2 == 0 else sides[::-1]:   # each first in turn
                j = run(cmd, envs[pol])
                res[(name, pol)].append(j)
                print(f"round {r + 1} {pol:8s} {name:8s} {json.dumps(j)}", flush=True)
    summary(res, policies, a)


def speed_line(label, ours, torch, rounds):
    """ours / torch of the medians, and of the runs of each round (side by
    side, so the VM's slow and fast spells cancel): their median and range."""
    speed = ours / torch
    pr = sorted(rounds)
    print(f"  {label}: tapegrad {ours:.1f} / pytorch {torch:.1f} images/s = {speed:.2f}x; "
          f"within rounds {statistics.median(pr):.2f}x ({pr[0]:.2f}-{pr[-1]:.2f}) "
          f"(target >= 2x: {'met' if speed >= 2 else 'NOT met'})")


def round_ratios(res, pol_ours, pol_torch):
    return [o["images_per_s"] / t["images_per_s"]
            for o, t in zip(res[("tapegrad", pol_ours)], res[("pytorch", pol_torch)])]


def summary(res, policies, a):
    ips = {k: statistics.median(j["images_per_s"] for j in v) for k, v in res.items()}
    print(f"\nDCGAN step, batch {a.batch}, {a.threads} threads, {2 * a.steps} timed steps "
          f"x {a.rounds} rounds (median images/s, max peak RSS):")
    for (name, pol), v in res.items():
        print(f"  {name:8s} OMP_WAIT_POLICY {pol:8s} {ips[(name, pol)]:9.1f} images/s   "
              f"peak RSS {max(j['peak_rss_mib'] for j in v):7.1f} MiB")
    for pol in policies:
        speed_line(f"same policy ({pol})", ips[("tapegrad", pol)], ips[("pytorch", pol)],
                   round_ratios(res, pol, pol))
    if len(policies) > 1:
        best = {n: max(policies, key=lambda p: ips[(n, p)]) for n in ("tapegrad", "pytorch")}
        # tapegrad's own pool ignores OMP_WAIT_POLICY: its runs under every
        # policy are one sample, whose median is fairer than the larger of two
        pooled = statistics.median(j["images_per_s"] for p in policies
                                   for j in res[("tapegrad", p)])
        torch_best = ips[("pytorch", best["pytorch"])]
        speed = pooled / torch_best
        print(f"  tapegrad pooled over the policies (it ignores OMP_WAIT_POLICY): {pooled:.1f} / "
              f"pytorch {best['pytorch']} {torch_best:.1f} images/s = {speed:.2f}x "
              f"(target >= 2x: {'met' if speed >= 2 else 'NOT met'})")
        speed_line(f"each at its faster policy (tapegrad {best['tapegrad']}, pytorch "
                   f"{best['pytorch']})", ips[("tapegrad", best["tapegrad"])],
                   ips[("pytorch", best["pytorch"])],
                   round_ratios(res, best["tapegrad"], best["pytorch"]))
    peak = {n: max(j["peak_rss_mib"] for (m, _), v in res.items() if m == n for j in v)
            for n in ("tapegrad", "pytorch")}
    mem = peak["tapegrad"] / peak["pytorch"]
    print(f"  memory ratio tapegrad/pytorch {mem:.2f}, max peak RSS over all runs "
          f"(target <= 0.25: {'met' if mem <= 0.25 else 'NOT met'})")
    res = {n: [j for (m, _), v in res.items() if m == n for j in v]
           for n in ("tapegrad", "pytorch")}
    base = statistics.median(j["rss_baseline_mib"] for j in res["pytorch"])
    print(f"  (pytorch's RSS before building any model: {base:.1f} MiB)")
    for j in res["tapegrad"]:
        m1, m2 = j["rss_max_first_n_mib"], j["rss_max_second_n_mib"]
        drift = (m2 - m1) / m1
        print(f"  tapegrad RSS: max over steps 1..{a.steps} {m1:.1f} MiB, over steps "
              f"{a.steps + 1}..{2 * a.steps} {m2:.1f} MiB: {100 * drift:+.1f}% (target within "
              f"5%: {'met' if abs(drift) <= 0.05 else 'NOT met'}); after step {a.steps} "
              f"{j['rss_after_n_mib']:.1f}, after step {2 * a.steps} {j['rss_after_2n_mib']:.1f}")


if __name__ == "__main__":
    sys.exit(main())
