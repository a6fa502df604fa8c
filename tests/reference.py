"""Naive reference implementations written directly from the papers' equations, with explicit
Python loops over anchors (and pairs). Slow by design; used only to check the vectorised core
in float64 (values and, through autograd, gradients)."""
from __future__ import annotations

import math

import torch
from torch import Tensor


def _unit(x: Tensor) -> Tensor:
    return x / x.norm(dim=-1, keepdim=True)


def _anchor_sets(za: Tensor, zb: Tensor, negatives: str, symmetric: bool, queue: Tensor | None):
    """List of (anchor, positive, [negatives]) triples for the InfoNCE family."""
    n = za.shape[0]
    e = torch.cat([za, zb])
    out = []
    if negatives == "all":
        for i in range(2 * n if symmetric else n):
            p = (i + n) % (2 * n)
            negs = [e[k] for k in range(2 * n) if k not in (i, p)]
            out.append((e[i], e[p], negs))
    elif negatives == "cross":
        for i in range(n):
            out.append((za[i], zb[i], [zb[j] for j in range(n) if j != i]))
        if symmetric:
            for i in range(n):
                out.append((zb[i], za[i], [za[j] for j in range(n) if j != i]))
    elif negatives == "none":
        for i in range(n):
            out.append((za[i], zb[i], []))
        if symmetric:
            for i in range(n):
                out.append((zb[i], za[i], []))
    if queue is not None:
        q = _unit(queue)
        out = [(a, p, negs + [q[k] for k in range(q.shape[0])]) for a, p, negs in out]
    return out


def _wmean(losses, weights, n):
    """t-SimCLR Sec. 4.1 weighted positive pairs: (1/A) sum_a p_{a mod N} l_a with p scaled to mean 1."""
    if weights is None:
        return torch.stack(losses).mean()
    p = weights / weights.mean()
    return torch.stack([p[k % n] * l for k, l in enumerate(losses)]).mean()


def infonce(za, zb, temperature=0.1, negatives="all", symmetric=True, queue=None, weights=None):
    za, zb = _unit(za), _unit(zb)
    losses = []
    for a, p, negs in _anchor_sets(za, zb, negatives, symmetric, queue):
        num = torch.exp(a @ p / temperature)
        den = num + sum((torch.exp(a @ k / temperature) for k in negs), torch.zeros_like(num))
        losses.append(-torch.log(num / den))
    return _wmean(losses, weights, za.shape[0])


def dcl(za, zb, temperature=0.1, negatives="all", symmetric=True, queue=None, weights=None):
    za, zb = _unit(za), _unit(zb)
    losses = []
    for a, p, negs in _anchor_sets(za, zb, negatives, symmetric, queue):
        den = sum(torch.exp(a @ k / temperature) for k in negs)
        losses.append(-a @ p / temperature + torch.log(den))
    return _wmean(losses, weights, za.shape[0])


def macl(za, zb, tau0=0.1, alpha=0.5, a0=0.0, reweight=True, negatives="all", symmetric=True, queue=None, weights=None):
    za, zb = _unit(za), _unit(zb)
    n = za.shape[0]
    A = sum(float((za[i] @ zb[i]).detach()) for i in range(n)) / n  # detached alignment (Eq. 6)
    tau = tau0 * (1 + alpha * (A - a0))  # Eq. 7
    losses = []
    for a, p, negs in _anchor_sets(za, zb, negatives, symmetric, queue):
        num = torch.exp(a @ p / tau)
        P = num / (num + sum((torch.exp(a @ k / tau) for k in negs), torch.zeros_like(num)))
        V = 1.0 / (1.0 - P.detach()) if reweight else 1.0  # Eq. 11
        losses.append(-V * torch.log(P))
    return _wmean(losses, weights, za.shape[0])


def hard_negative(za, zb, temperature=0.5, beta=1.0, tau_plus=0.0, negatives="all", symmetric=True, queue=None, weights=None):
    za, zb = _unit(za), _unit(zb)
    t = temperature
    losses = []
    for a, p, negs in _anchor_sets(za, zb, negatives, symmetric, queue):
        m = len(negs)
        pos = torch.exp(a @ p / t)
        neg = torch.stack([torch.exp(a @ k / t) for k in negs])
        imp = neg ** beta  # exp(beta s / t)
        ng = m * (imp * neg).sum() / imp.sum()
        if tau_plus > 0:
            ng = torch.clamp((-tau_plus * m * pos + ng) / (1 - tau_plus), min=m * math.exp(-1 / t))
        losses.append(-torch.log(pos / (pos + ng)))
    return _wmean(losses, weights, za.shape[0])


def supcon(za, zb, labels, temperature=0.1):
    za, zb = _unit(za), _unit(zb)
    e = torch.cat([za, zb])
    y = torch.cat([labels, labels])
    losses = []
    for i in range(e.shape[0]):
        others = [k for k in range(e.shape[0]) if k != i]
        den = sum(torch.exp(e[i] @ e[k] / temperature) for k in others)
        pos = [k for k in others if y[k] == y[i]]
        losses.append(-sum(torch.log(torch.exp(e[i] @ e[p] / temperature) / den) for p in pos) / len(pos))
    return torch.stack(losses).mean()


def xclr(za, zb, similarity, temperature=0.1, target_temperature=0.1, queue=None, queue_similarity=None):
    za, zb = _unit(za), _unit(zb)
    n = za.shape[0]
    e = torch.cat([za, zb])
    losses = []
    for i in range(2 * n):
        ks = [k for k in range(2 * n) if k != i]
        gl = [similarity[i % n, k % n] / target_temperature for k in ks]
        ll = [e[i] @ e[k] / temperature for k in ks]
        if queue is not None:
            qq = _unit(queue)
            for k in range(qq.shape[0]):
                gl.append((queue_similarity[i % n, k] if queue_similarity is not None else torch.tensor(float("-inf"))) / target_temperature)
                ll.append(e[i] @ qq[k] / temperature)
        s = torch.softmax(torch.stack(gl), dim=0)
        logits = torch.stack(ll)
        logp = logits - torch.logsumexp(logits, dim=0)
        losses.append(-(s * logp).sum())
    return torch.stack(losses).mean()


def tsimclr(za, zb, temperature=5.0, t_df=5.0, weights=None, queue=None):
    n = za.shape[0]
    e = torch.cat([za, zb])

    def q(a, b):
        return (1 + ((a - b) ** 2).sum() / (temperature * t_df)) ** (-(t_df + 1) / 2)

    z = sum(q(e[j], e[k]) for j in range(2 * n) for k in range(2 * n) if j != k)
    if queue is not None:
        z = z + 2 * sum(q(e[j], queue[k]) for j in range(2 * n) for k in range(queue.shape[0]))
    w = torch.ones(n, dtype=za.dtype) if weights is None else weights / weights.mean()
    losses = []
    for i in range(2 * n):  # anchors: both orders of every positive pair
        a, b = e[i], e[(i + n) % (2 * n)]
        losses.append(w[i % n] * -torch.log(q(a, b) / z))
    return torch.stack(losses).mean()


def align_uniform(za, zb, alpha=2.0, t=2.0, align_weight=1.0, uniform_weight=1.0, queue=None):
    za, zb = _unit(za), _unit(zb)
    n = za.shape[0]
    align = sum((za[i] - zb[i]).norm() ** alpha for i in range(n)) / n

    def unif(x):
        terms = [torch.exp(-t * ((x[i] - x[j]) ** 2).sum()) for i in range(n) for j in range(i + 1, n)]
        if queue is not None:
            qq = _unit(queue)
            terms += [torch.exp(-t * ((x[i] - qq[k]) ** 2).sum()) for i in range(n) for k in range(qq.shape[0])]
        return torch.log(sum(terms) / len(terms))

    return align_weight * align + uniform_weight * (unif(za) + unif(zb)) / 2


def cmc(views, temperature=0.1, queue=None):
    z = _unit(views)
    v, n, _ = z.shape
    qq = _unit(queue) if queue is not None else None
    total = 0.0
    for a in range(v):
        for b in range(v):
            if a == b:
                continue
            pair = []
            for i in range(n):
                logits = [z[a, i] @ z[b, j] / temperature for j in range(n)]
                if qq is not None:
                    logits += [z[a, i] @ qq[k] / temperature for k in range(qq.shape[0])]
                pair.append(-logits[i] + torch.logsumexp(torch.stack(logits), 0))
            total = total + torch.stack(pair).mean()
    return total


def cacr(views, t_pos=1.0, t_neg=2.0, detach_weights=False, queue=None, negatives="same_view", keys=None):
    """CACR from the paper: Sec. 3.2 Eq. 5 (negatives of query x_i are the other queries x_j, j != i, of
    its own view, plus the queue), every view in turn the query as in App. Algorithm 3; both terms
    averaged over views and queries. ``negatives="cross_view"``: the released code's view pairs v < u.
    ``keys``: Algorithm 3's momentum keys as positives, positive weights without gradient."""
    z = _unit(views)
    v, n, _ = z.shape
    qq = _unit(queue) if queue is not None else None
    kk = _unit(keys.detach()) if keys is not None else None

    def c(x, y):
        return ((x - y) ** 2).sum()

    att = []
    for a in range(v):  # each view as the query
        for i in range(n):
            if kk is None:
                costs = torch.stack([c(z[a, i], z[b, i]) for b in range(v) if b != a])
                w = torch.softmax(t_pos * costs, 0)  # pi^+: larger cost, larger weight
            else:
                costs = torch.stack([c(z[a, i], kk[b, i]) for b in range(v) if b != a])
                w = torch.softmax(t_pos * costs.detach(), 0)
            w = w.detach() if detach_weights else w
            att.append((w * costs).sum())
    if negatives == "same_view":
        groups = [(a, a) for a in range(v)]
    else:
        groups = [(a, b) for a in range(v) for b in range(a + 1, v)]
    rep = []
    for a, b in groups:
        for i in range(n):
            costs = [c(z[a, i], z[b, j]) for j in range(n) if j != i]
            if qq is not None:
                costs += [c(z[a, i], qq[k]) for k in range(qq.shape[0])]
            costs = torch.stack(costs)
            w = torch.softmax(-t_neg * costs, 0)  # pi^-: closer negatives weigh more
            w = w.detach() if detach_weights else w
            rep.append(-(w * costs).sum())
    return torch.stack(att).mean() + torch.stack(rep).mean()


def simclr_l2(za, zb, temperature=1.0, negatives="all", symmetric=True, queue=None, weights=None):
    """t-SimCLR paper Sec. 3.1.4: InfoNCE with s(a, b) = -||a - b||_2, features not normalised, raw queue."""
    def s(a, b):
        return -torch.sqrt(((a - b) ** 2).sum()) / temperature

    losses = []
    for a, p, negs in _anchor_sets(za, zb, negatives, symmetric, None):
        negs = negs + ([queue[k] for k in range(queue.shape[0])] if queue is not None else [])
        logits = torch.stack([s(a, p)] + [s(a, k) for k in negs])
        losses.append(torch.logsumexp(logits, 0) - logits[0])
    return _wmean(losses, weights, za.shape[0])
