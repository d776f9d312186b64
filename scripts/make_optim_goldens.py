#!/usr/bin/python3
"""Writes the PyTorch golden files of tapegrad's optimizers and losses.

Run from the repository root with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_optim_goldens.py

tests/golden/optim/<config>_<f32|f64>.safetensors, one per optimizer config:
  p<j>.init          the two initial parameters, shapes (3, 4) and (5,)
  g<k>.p<j>          the gradient of parameter j at step k (k = 0..4, or up
                     to the metadata's "steps" - 1 where given); absent
                     when that parameter has no gradient at that step (skipped)
  p<j>.step<k>       parameter j after step k
  p<j>.state.<name>  parameter j's state after the last step, as torch's
                     optimizer.state holds it: "step" (f32, all but SGD;
                     RMSprop's Python int as f32), "exp_avg", "exp_avg_sq",
                     "max_exp_avg_sq" (amsgrad), "momentum_buffer" (SGD with
                     momentum, RMSprop with momentum > 0), "square_avg" and
                     "grad_avg" (centered RMSprop), "sum" (Adagrad),
                     "exp_inf" (Adamax), "mu_product" (NAdam), "acc_delta"
                     (Adadelta), "prev" and "step_size" (Rprop), "eta",
                     "mu" and "ax" (ASGD)
  metadata           the optimizer ("sgd", "adam", "adamw", "rmsprop",
                     "adagrad", "adamax", "nadam", "radam", "adadelta",
                     "rprop", "asgd") and its
                     options, flags as "0" or "1" (RMSprop's alpha and
                     centered only in its files); for the configs of
                     GROUPS, "groups" = "2" and "g1.<option>", the options
                     of parameter 1's param group that differ from the
                     constructor's (parameter 0's group).
tests/golden/optim/lbfgs*_<f32|f64>.safetensors: torch.optim.LBFGS on a
  small regression (lbfgs_case below).
tests/golden/optim/loss.safetensors (f64):
  <loss>.input, <loss>.target and per reduction r in mean/sum/none:
  <loss>.<r>.value, <loss>.<r>.grad_input (and .grad_target for the
  elementwise losses), where the gradient is of sum(value * <loss>.<r>.gout)
  with gout a fixed random tensor (ones for the 0-d reductions).
  bce_inf.* and ce_inf.* (reduction none only, gout ones): infinite logits,
  where PyTorch's values include inf and NaN.
  Probability losses and smooth L1 / Huber (loss_cases_more), each with
  <loss>.input, <loss>.target, the same per-reduction keys, and
  <loss>.none.hess, <loss>.none.ggin: the gradient for input of
  sum(grad_input * hess) (reduction none, a second derivative):
    bcep      binary_cross_entropy, input in (0.02, 0.98)
    bcep_w    the same with <loss>.weight (4) broadcast over (3, 4)
    sl1       smooth_l1_loss, beta 0.5 (<loss>.param), |d| = beta included
    sl1_b0    smooth_l1_loss, beta 0 (L1), d = 0 included
    huber     huber_loss, delta 0.75, |d| = delta included
  bcep_edge.* (reduction none, gout ones, no target gradient: it is infinite
  there): input 0 and 1, where the clamp at -100 and the eps of the
  gradient act, and 1e-30.
tests/golden/optim/clip.safetensors: torch.nn.utils.clip_grad_norm_ and
  clip_grad_value_, one case per name in the metadata's "cases" (comma
  separated), each with metadata <case>.fn ("norm" | "value"),
  <case>.max_norm, <case>.norm_type ("inf" for infinity) or
  <case>.clip_value:
  <case>.g<j>        the gradient of parameter j before (absent: no gradient)
  <case>.out<j>      that gradient after the call
  <case>.total       the total norm clip_grad_norm_ returned (norm cases).
The safetensors files are written by scripts/stfile.py.
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "golden", "optim")

CONFIGS = [
    ("sgd_plain", torch.optim.SGD, dict(lr=0.1)),
    ("sgd_momentum", torch.optim.SGD, dict(lr=0.05, momentum=0.9, dampening=0.1)),
    ("sgd_nesterov", torch.optim.SGD, dict(lr=0.05, momentum=0.8, nesterov=True)),
    ("sgd_wd", torch.optim.SGD, dict(lr=0.1, momentum=0.5, weight_decay=0.01)),
    ("adam", torch.optim.Adam, dict(lr=0.01, betas=(0.9, 0.999), eps=1e-8)),
    ("adam_wd", torch.optim.Adam, dict(lr=0.02, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1)),
    ("adamw", torch.optim.AdamW, dict(lr=0.01, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.05)),
    # beta2 well below 1, so that v falls between steps and amsgrad's maximum
    # differs from v (optim_case checks that it does)
    ("adam_amsgrad", torch.optim.Adam,
     dict(lr=0.02, betas=(0.8, 0.5), eps=1e-6, weight_decay=0.1, amsgrad=True)),
    ("adamw_amsgrad", torch.optim.AdamW,
     dict(lr=0.01, betas=(0.9, 0.6), eps=1e-8, weight_decay=0.05, amsgrad=True)),
    ("adam_maximize", torch.optim.Adam, dict(lr=0.01, eps=1e-8, weight_decay=0.1, maximize=True)),
    ("adamw_amsgrad_maximize", torch.optim.AdamW,
     dict(lr=0.02, betas=(0.7, 0.5), eps=1e-7, weight_decay=0.02, amsgrad=True, maximize=True)),
    ("sgd_maximize", torch.optim.SGD, dict(lr=0.1, weight_decay=0.1, maximize=True)),
    ("sgd_nesterov_maximize", torch.optim.SGD,
     dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01, maximize=True)),
    ("rmsprop", torch.optim.RMSprop, dict(lr=0.01)),
    # rmsprop_wd and rmsprop_centered: eps large enough against sqrt(v) that
    # where it is added shows
    ("rmsprop_wd", torch.optim.RMSprop, dict(lr=0.02, alpha=0.9, eps=0.1, weight_decay=0.1)),
    ("rmsprop_momentum", torch.optim.RMSprop, dict(lr=0.01, alpha=0.8, momentum=0.9)),
    ("rmsprop_centered", torch.optim.RMSprop, dict(lr=0.01, alpha=0.7, eps=0.05, centered=True)),
    ("rmsprop_maximize", torch.optim.RMSprop, dict(lr=0.01, weight_decay=0.01, maximize=True)),
    ("rmsprop_centered_momentum_maximize", torch.optim.RMSprop,
     dict(lr=0.005, alpha=0.9, eps=1e-7, weight_decay=0.05, momentum=0.5, centered=True,
          maximize=True)),
]
# Two param groups: parameter 0 with the constructor's options, parameter 1
# with these over them (torch's list of dicts): AdamW without weight decay
# for the second group, SGD with momentum for the first group only.
GROUPS = {
    "adamw_groups": dict(weight_decay=0.0, lr=0.03, amsgrad=True, betas=(0.8, 0.5)),
    "sgd_groups": dict(lr=0.2, momentum=0.0, nesterov=False, maximize=True),
    "adam_groups": dict(eps=1e-4, weight_decay=0.05),
    "rmsprop_groups": dict(lr=0.02, momentum=0.0, centered=True, weight_decay=0.1),
}
CONFIGS += [
    ("adamw_groups", torch.optim.AdamW,
     dict(lr=0.01, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1)),
    ("sgd_groups", torch.optim.SGD, dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01)),
    ("adam_groups", torch.optim.Adam, dict(lr=0.02, betas=(0.85, 0.99), amsgrad=True)),
    ("rmsprop_groups", torch.optim.RMSprop, dict(lr=0.01, alpha=0.9, momentum=0.9)),
]
# Adagrad, Adamax, NAdam and RAdam, each with its defaults, with every
# option, and in two groups.  RAdam runs 8 steps ("steps" in the metadata),
# so that its rectified update (rho_t > 5, from step 6) is reached.
CONFIGS += [
    ("adagrad", torch.optim.Adagrad, dict(lr=0.1)),
    ("adagrad_all", torch.optim.Adagrad,
     dict(lr=0.05, lr_decay=0.1, weight_decay=0.1, initial_accumulator_value=0.5, eps=1e-3,
          maximize=True)),
    ("adamax", torch.optim.Adamax, dict(lr=0.02)),
    ("adamax_all", torch.optim.Adamax,
     dict(lr=0.01, betas=(0.8, 0.5), eps=1e-3, weight_decay=0.1, maximize=True)),
    ("nadam", torch.optim.NAdam, dict(lr=0.01)),
    ("nadam_all", torch.optim.NAdam,
     dict(lr=0.02, betas=(0.8, 0.9), eps=1e-6, weight_decay=0.1, momentum_decay=0.1)),
    ("radam", torch.optim.RAdam, dict(lr=0.01)),
    ("radam_all", torch.optim.RAdam, dict(lr=0.02, betas=(0.8, 0.99), eps=1e-4,
                                          weight_decay=0.1)),
    ("adagrad_groups", torch.optim.Adagrad, dict(lr=0.1, initial_accumulator_value=0.1)),
    ("adamax_groups", torch.optim.Adamax, dict(lr=0.02, weight_decay=0.05)),
    ("nadam_groups", torch.optim.NAdam, dict(lr=0.01, momentum_decay=0.01)),
    ("radam_groups", torch.optim.RAdam, dict(lr=0.01, betas=(0.9, 0.99))),
]
GROUPS.update({
    "adagrad_groups": dict(lr=0.05, lr_decay=0.2, eps=1e-2, maximize=True),
    "adamax_groups": dict(betas=(0.7, 0.9), weight_decay=0.0, eps=1e-4),
    "nadam_groups": dict(lr=0.03, betas=(0.8, 0.95), weight_decay=0.1, momentum_decay=0.2),
    "radam_groups": dict(lr=0.02, betas=(0.85, 0.999), eps=1e-3, weight_decay=0.05),
})
# Adadelta and Rprop likewise; Rprop's gradients change sign between steps,
# so its step sizes grow, shrink and (rprop_all) hit both clamps.
CONFIGS += [
    ("adadelta", torch.optim.Adadelta, dict(lr=1.0)),
    ("adadelta_all", torch.optim.Adadelta,
     dict(lr=0.5, rho=0.8, eps=1e-3, weight_decay=0.1, maximize=True)),
    ("adadelta_groups", torch.optim.Adadelta, dict(lr=0.9, rho=0.95)),
    ("rprop", torch.optim.Rprop, dict(lr=0.01)),
    ("rprop_all", torch.optim.Rprop,
     dict(lr=0.05, etas=(0.3, 1.9), step_sizes=(0.02, 0.1), maximize=True)),
    ("rprop_groups", torch.optim.Rprop, dict(lr=0.02, etas=(0.4, 1.5))),
]
GROUPS.update({
    "adadelta_groups": dict(lr=0.3, rho=0.5, eps=1e-4, weight_decay=0.05, maximize=True),
    "rprop_groups": dict(lr=0.1, etas=(0.6, 1.1), step_sizes=(1e-3, 0.15), maximize=True),
})
# ASGD with t0 small enough that its average starts within the steps.
CONFIGS += [
    ("asgd", torch.optim.ASGD, dict(lr=0.01)),
    ("asgd_all", torch.optim.ASGD,
     dict(lr=0.05, lambd=0.1, alpha=0.5, t0=2, weight_decay=0.1, maximize=True)),
    ("asgd_groups", torch.optim.ASGD, dict(lr=0.02, t0=1)),
]
GROUPS["asgd_groups"] = dict(lr=0.05, lambd=0.01, alpha=1.0, t0=3, maximize=True)
STEPS = {"radam": 8, "radam_all": 8, "radam_groups": 8}
KIND = {torch.optim.SGD: "sgd", torch.optim.Adam: "adam", torch.optim.AdamW: "adamw",
        torch.optim.RMSprop: "rmsprop", torch.optim.Adagrad: "adagrad",
        torch.optim.Adamax: "adamax", torch.optim.NAdam: "nadam", torch.optim.RAdam: "radam",
        torch.optim.Adadelta: "adadelta", torch.optim.Rprop: "rprop", torch.optim.ASGD: "asgd"}
# The options of these kinds in the metadata, from the optimizer's defaults.
MORE_META = {"adagrad": ("lr_decay", "initial_accumulator_value", "eps", "weight_decay"),
             "adamax": ("eps", "weight_decay"), "nadam": ("eps", "weight_decay", "momentum_decay"),
             "radam": ("eps", "weight_decay"), "adadelta": ("rho", "eps", "weight_decay"),
             "asgd": ("lambd", "alpha", "t0", "weight_decay")}
PAIRS = {"betas": ("beta1", "beta2"), "etas": ("eta_minus", "eta_plus"),
         "step_sizes": ("step_size_min", "step_size_max")}
SHAPES = [(3, 4), (5,)]
SKIP = (2, 1)  # parameter 1 has no gradient at step 2


def optim_case(name, cls, opts, dtype):
    gen = torch.Generator().manual_seed(1234)
    params = [torch.randn(s, generator=gen, dtype=torch.float64).to(dtype).requires_grad_()
              for s in SHAPES]
    steps = STEPS.get(name, 5)
    grads = [[torch.randn(s, generator=gen, dtype=torch.float64).to(dtype) for s in SHAPES]
             for _ in range(steps)]
    tensors = [("p%d.init" % j, p.detach().clone()) for j, p in enumerate(params)]
    if name in GROUPS:
        opt = cls([{"params": [params[0]]}, dict(params=[params[1]], **GROUPS[name])], **opts)
    else:
        opt = cls(params, **opts)
    for k in range(steps):
        for j, p in enumerate(params):
            if (k, j) == SKIP:
                p.grad = None
            else:
                p.grad = grads[k][j].clone()
                tensors.append(("g%d.p%d" % (k, j), grads[k][j]))
        opt.step()
        tensors += [("p%d.step%d" % (j, k), p.detach().clone()) for j, p in enumerate(params)]
    for j, p in enumerate(params):
        for key, v in sorted(opt.state[p].items()):
            if isinstance(v, int):   # RMSprop's step
                v = torch.tensor(float(v), dtype=torch.float32)
            if v is not None:
                tensors.append(("p%d.state.%s" % (j, key), v.detach().clone()))
    if opts.get("amsgrad"):
        st = opt.state[params[0]]
        assert not torch.equal(st["max_exp_avg_sq"], st["exp_avg_sq"]), name
    meta = {"kind": KIND[cls], "lr": repr(opts["lr"]),
            "momentum": repr(opts.get("momentum", 0.0)),
            "dampening": repr(opts.get("dampening", 0.0)),
            "nesterov": "1" if opts.get("nesterov") else "0",
            "weight_decay": repr(opts.get("weight_decay", 0.0 if cls is not torch.optim.AdamW else 0.01)),
            "beta1": repr(opts.get("betas", (0.9, 0.999))[0]),
            "beta2": repr(opts.get("betas", (0.9, 0.999))[1]),
            "eps": repr(opts.get("eps", 1e-8)),
            "amsgrad": "1" if opts.get("amsgrad") else "0",
            "maximize": "1" if opts.get("maximize") else "0"}
    if cls is torch.optim.RMSprop:
        meta["alpha"] = repr(opts.get("alpha", 0.99))
        meta["centered"] = "1" if opts.get("centered") else "0"
    for key in MORE_META.get(KIND[cls], ()):
        meta[key] = repr(float(opt.defaults[key]))
    for pair, (first, second) in PAIRS.items():
        if pair in opt.defaults:
            meta[first], meta[second] = (repr(float(b)) for b in opt.defaults[pair])
    if steps != 5:
        meta["steps"] = str(steps)
    for key, v in GROUPS.get(name, {}).items():
        if key in PAIRS:
            meta["g1." + PAIRS[key][0]], meta["g1." + PAIRS[key][1]] = repr(v[0]), repr(v[1])
        else:
            meta["g1." + key] = ("1" if v else "0") if isinstance(v, bool) else repr(v)
    if name in GROUPS:
        meta["groups"] = "2"
    suffix = "f32" if dtype == torch.float32 else "f64"
    write_safetensors(os.path.join(OUT, "%s_%s.safetensors" % (name, suffix)), tensors, meta)


def loss_cases():
    gen = torch.Generator().manual_seed(99)
    rnd = lambda *s: torch.randn(*s, generator=gen, dtype=torch.float64)
    tensors = []
    # Elementwise losses: input (3, 4).  bce's logits include 0 (gradient
    # sigmoid(0) - t there) and +-1000 / +-40 (stability).
    logits = rnd(3, 4) * 3
    logits[0, 0], logits[0, 1], logits[1, 2], logits[2, 3], logits[2, 0] = 0.0, 1000.0, -1000.0, 40.0, -40.0
    cases = [("mse", F.mse_loss, rnd(3, 4), rnd(3, 4)),
             ("l1", F.l1_loss, rnd(3, 4), rnd(3, 4)),
             ("bce", F.binary_cross_entropy_with_logits, logits,
              torch.rand(3, 4, generator=gen, dtype=torch.float64))]
    for name, fn, x, t in cases:
        tensors += [(name + ".input", x), (name + ".target", t)]
        for red in ("mean", "sum", "none"):
            xi, ti = x.clone().requires_grad_(), t.clone().requires_grad_()
            v = fn(xi, ti, reduction=red)
            gout = rnd(*v.shape) if red == "none" else torch.ones((), dtype=torch.float64)
            gx, gt = torch.autograd.grad((v * gout).sum(), [xi, ti])
            tensors += [("%s.%s.value" % (name, red), v.detach()),
                        ("%s.%s.gout" % (name, red), gout),
                        ("%s.%s.grad_input" % (name, red), gx),
                        ("%s.%s.grad_target" % (name, red), gt)]
    # Cross entropy: (4, 5) logits, one row with values near 1000.
    x = rnd(4, 5) * 2
    x[2] = torch.tensor([1000.0, 999.0, 998.5, -1000.0, 1000.0], dtype=torch.float64)
    t = torch.tensor([1, 0, 4, 3], dtype=torch.int64)
    tensors += [("ce.input", x), ("ce.target", t)]
    for red in ("mean", "sum", "none"):
        xi = x.clone().requires_grad_()
        v = F.cross_entropy(xi, t, reduction=red)
        gout = rnd(*v.shape) if red == "none" else torch.ones((), dtype=torch.float64)
        (gx,) = torch.autograd.grad((v * gout).sum(), [xi])
        tensors += [("ce.%s.value" % red, v.detach()), ("ce.%s.gout" % red, gout),
                    ("ce.%s.grad_input" % red, gx)]
    tensors += infinite_logit_cases()
    tensors += loss_cases_more()
    write_safetensors(os.path.join(OUT, "loss.safetensors"), tensors, {"torch": torch.__version__})


def loss_case(name, fn, x, t, **kw):
    """The keys of one elementwise loss case (see the module docstring)."""
    gen = torch.Generator().manual_seed(len(name) * 31 + 5)
    rnd = lambda *s: torch.randn(*s, generator=gen, dtype=torch.float64)
    out = [(name + ".input", x), (name + ".target", t)]
    for red in ("mean", "sum", "none"):
        xi, ti = x.clone().requires_grad_(), t.clone().requires_grad_()
        v = fn(xi, ti, reduction=red, **kw)
        gout = rnd(*v.shape) if red == "none" else torch.ones((), dtype=torch.float64)
        gx, gt = torch.autograd.grad((v * gout).sum(), [xi, ti], create_graph=True)
        out += [("%s.%s.value" % (name, red), v.detach()),
                ("%s.%s.gout" % (name, red), gout),
                ("%s.%s.grad_input" % (name, red), gx.detach()),
                ("%s.%s.grad_target" % (name, red), gt.detach())]
        if red == "none":
            hess = rnd(*x.shape)
            (ggx,) = torch.autograd.grad((gx * hess).sum(), [xi])
            out += [(name + ".none.hess", hess), (name + ".none.ggin", ggx)]
    return out


def loss_cases_more():
    """binary_cross_entropy, smooth_l1_loss and huber_loss: see the module
    docstring.  A generator of their own leaves the other cases as they were."""
    gen = torch.Generator().manual_seed(2024)
    rnd = lambda *s: torch.randn(*s, generator=gen, dtype=torch.float64)
    uni = lambda *s: torch.rand(*s, generator=gen, dtype=torch.float64)
    out = []
    x, t = 0.02 + 0.96 * uni(3, 4), uni(3, 4)
    t[0, 0], t[1, 1] = 0.0, 1.0
    out += loss_case("bcep", F.binary_cross_entropy, x, t)
    w = 0.5 + uni(4)
    out += [("bcep_w.weight", w)]
    out += loss_case("bcep_w", F.binary_cross_entropy, 0.02 + 0.96 * uni(3, 4), uni(3, 4),
                     weight=w)
    # |d| = beta (0.5) exactly, and below |d| = delta (0.75): x - t = +-0.5 with t = 0.25,
    # where the first derivative is 1 and the second 0
    x, t = rnd(3, 4), rnd(3, 4)
    x[0, 0], t[0, 0], x[0, 1], t[0, 1] = 0.75, 0.25, -0.25, 0.25
    out += loss_case("sl1", F.smooth_l1_loss, x, t, beta=0.5)
    out += [("sl1.param", torch.tensor(0.5, dtype=torch.float64))]
    x, t = rnd(3, 4), rnd(3, 4)
    x[1, 2] = t[1, 2]
    out += loss_case("sl1_b0", F.smooth_l1_loss, x, t, beta=0.0)
    out += [("sl1_b0.param", torch.tensor(0.0, dtype=torch.float64))]
    x, t = rnd(3, 4) * 2, rnd(3, 4)
    x[2, 3], t[2, 3], x[0, 2], t[0, 2] = 1.0, 0.25, -0.5, 0.25
    out += loss_case("huber", F.huber_loss, x, t, delta=0.75)
    out += [("huber.param", torch.tensor(0.75, dtype=torch.float64))]
    x = torch.tensor([0.0, 0.0, 1.0, 1.0, 1e-30, 0.5], dtype=torch.float64)
    t = torch.tensor([0.0, 1.0, 0.0, 1.0, 1.0, 0.25], dtype=torch.float64)
    xi = x.clone().requires_grad_()
    v = F.binary_cross_entropy(xi, t, reduction="none")
    (gx,) = torch.autograd.grad(v.sum(), [xi])
    out += [("bcep_edge.input", x), ("bcep_edge.target", t), ("bcep_edge.none.value", v.detach()),
            ("bcep_edge.none.grad_input", gx)]
    return out


def infinite_logit_cases():
    """bce_inf and ce_inf: PyTorch's values at infinite logits, NaN included,
    with reduction none and gout ones.  bce at x = +-inf for t in {0, 0.3, 1}
    (torch: (1 - t) x at +inf, NaN at -inf, where its formula meets
    inf - inf), then finite extremes; cross entropy on rows holding +inf (its
    log_softmax makes the whole row NaN) or -inf (a class of probability 0)."""
    inf = float("inf")
    x = torch.tensor([inf, inf, inf, -inf, -inf, -inf, 1e4, -1e4, 30.0, -30.0],
                     dtype=torch.float64)
    t = torch.tensor([0.0, 0.3, 1.0, 0.0, 0.3, 1.0, 0.0, 1.0, 0.5, 0.5], dtype=torch.float64)
    xi, ti = x.clone().requires_grad_(), t.clone().requires_grad_()
    v = F.binary_cross_entropy_with_logits(xi, ti, reduction="none")
    gx, gt = torch.autograd.grad(v.sum(), [xi, ti])
    out = [("bce_inf.input", x), ("bce_inf.target", t), ("bce_inf.none.value", v.detach()),
           ("bce_inf.none.grad_input", gx), ("bce_inf.none.grad_target", gt)]
    x = torch.tensor([[inf, 0.0, 1.0], [inf, 0.0, 1.0], [inf, inf, 1.0], [inf, -inf, 0.0],
                      [-inf, 0.0, 1.0], [-inf, 0.0, 1.0]], dtype=torch.float64)
    t = torch.tensor([0, 1, 2, 1, 0, 2], dtype=torch.int64)
    xi = x.clone().requires_grad_()
    v = F.cross_entropy(xi, t, reduction="none")
    (gx,) = torch.autograd.grad(v.sum(), [xi])
    return out + [("ce_inf.input", x), ("ce_inf.target", t), ("ce_inf.none.value", v.detach()),
                  ("ce_inf.none.grad_input", gx)]


CLIP_SHAPES = [(3, 4), (5,), (2, 2)]
CLIP_CASES = [  # name, fn, dtypes of the three gradients (None: no gradient), args
    ("l2_clipped", "norm", (torch.float32,) * 3, dict(max_norm=1.0, norm_type=2.0)),
    ("l2_unclipped", "norm", (torch.float32,) * 3, dict(max_norm=100.0, norm_type=2.0)),
    ("l1", "norm", (torch.float32,) * 3, dict(max_norm=2.0, norm_type=1.0)),
    ("linf", "norm", (torch.float32,) * 3, dict(max_norm=0.5, norm_type=float("inf"))),
    ("l3_f64", "norm", (torch.float64,) * 3, dict(max_norm=0.75, norm_type=3.0)),
    ("mixed_f32_f64", "norm", (torch.float32, torch.float64, None),
     dict(max_norm=1.0, norm_type=2.0)),
    ("bf16", "norm", (torch.bfloat16,) * 3, dict(max_norm=1.0, norm_type=2.0)),
    ("f16_f32", "norm", (torch.float16, torch.float32, torch.float16),
     dict(max_norm=0.5, norm_type=2.0)),
    ("value_f32", "value", (torch.float32, None, torch.float32), dict(clip_value=0.3)),
    ("value_bf16", "value", (torch.bfloat16,) * 3, dict(clip_value=0.7)),
]


def clip_cases():
    gen = torch.Generator().manual_seed(7)
    tensors, meta = [], {"torch": torch.__version__}
    for name, fn, dtypes, args in CLIP_CASES:
        params = []
        for j, (shape, dt) in enumerate(zip(CLIP_SHAPES, dtypes)):
            g = torch.randn(shape, generator=gen, dtype=torch.float64)
            p = torch.zeros(shape, dtype=dt or torch.float32, requires_grad=True)
            if dt is not None:
                p.grad = g.to(dt)
                tensors.append(("%s.g%d" % (name, j), p.grad.clone()))
            params.append(p)
        meta[name + ".fn"] = fn
        if fn == "norm":
            total = torch.nn.utils.clip_grad_norm_(params, **args)
            tensors.append((name + ".total", total.detach().to(torch.float64).reshape(())))
            meta[name + ".max_norm"] = repr(args["max_norm"])
            meta[name + ".norm_type"] = repr(args["norm_type"])
        else:
            torch.nn.utils.clip_grad_value_(params, **args)
            meta[name + ".clip_value"] = repr(args["clip_value"])
        tensors += [("%s.out%d" % (name, j), p.grad.clone()) for j, p in enumerate(params)
                    if p.grad is not None]
    meta["cases"] = ",".join(c[0] for c in CLIP_CASES)
    write_safetensors(os.path.join(OUT, "clip.safetensors"), tensors, meta)


# L-BFGS on a small regression, loss = mse(tanh(X W) v, y), W (3, 4), v (4,):
# a fixed step with a short history (pairs dropped), the strong Wolfe line
# search (with lr 50 its zoom also moves a trial step too close to the
# bracket's ends after its "insufficient progress"), and torch's defaults
# (which stop on tolerance_change).
LBFGS_CASES = {
    "lbfgs": dict(lr=1, max_iter=5, history_size=3),
    "lbfgs_wolfe": dict(lr=1, max_iter=10, history_size=4, line_search_fn="strong_wolfe"),
    "lbfgs_wolfe_far": dict(lr=50, max_iter=10, history_size=4, line_search_fn="strong_wolfe"),
    "lbfgs_default": dict(),
}


def lbfgs_case(name, opts, dtype):
    """tests/golden/optim/<name>_<f32|f64>.safetensors: X, y, W.init, v.init;
    after step k (k = 0..2) W.step<k>, v.step<k>, loss<k> (the step's return
    value, its first evaluation), func_evals<k> and n_iter<k> (torch's state);
    metadata the options (max_eval as torch computed it, line_search_fn "1"
    for strong_wolfe, else "0")."""
    gen = torch.Generator().manual_seed(77)
    rnd = lambda *s: torch.randn(*s, generator=gen, dtype=torch.float64).to(dtype)
    X, y, W, v = rnd(8, 3), rnd(8), rnd(3, 4).requires_grad_(), rnd(4).requires_grad_()
    tensors = [("X", X), ("y", y), ("W.init", W.detach().clone()), ("v.init", v.detach().clone())]
    opt = torch.optim.LBFGS([W, v], **opts)

    def closure():
        opt.zero_grad()
        loss = F.mse_loss(torch.tanh(X @ W) @ v, y)
        loss.backward()
        return loss
    for k in range(3):
        loss = opt.step(closure)
        st = opt.state[W]
        tensors += [("W.step%d" % k, W.detach().clone()), ("v.step%d" % k, v.detach().clone()),
                    ("loss%d" % k, torch.tensor(float(loss), dtype=torch.float64)),
                    ("func_evals%d" % k, torch.tensor(st["func_evals"], dtype=torch.int64)),
                    ("n_iter%d" % k, torch.tensor(st["n_iter"], dtype=torch.int64))]
    g = opt.param_groups[0]
    meta = {"kind": "lbfgs", "lr": repr(float(g["lr"])), "max_iter": str(g["max_iter"]),
            "max_eval": str(g["max_eval"]), "tolerance_grad": repr(g["tolerance_grad"]),
            "tolerance_change": repr(g["tolerance_change"]),
            "history_size": str(g["history_size"]),
            "line_search_fn": "1" if g["line_search_fn"] == "strong_wolfe" else "0"}
    suffix = "f32" if dtype == torch.float32 else "f64"
    write_safetensors(os.path.join(OUT, "%s_%s.safetensors" % (name, suffix)), tensors, meta)


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, cls, opts in CONFIGS:
        for dtype in (torch.float32, torch.float64):
            optim_case(name, cls, opts, dtype)
    for name, opts in LBFGS_CASES.items():
        for dtype in (torch.float32, torch.float64):
            lbfgs_case(name, opts, dtype)
    loss_cases()
    clip_cases()


if __name__ == "__main__":
    main()
