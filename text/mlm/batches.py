"""MLM batches: length-bucketed sentence batches, their (ids, attention mask) and BERT's masking."""
from __future__ import annotations

import torch
from torch import Tensor

from suite.train import epoch_batches, seeded_generator
from text.mlm.config import SPECIAL, UNK


def bucketed_batches(index: Tensor, lengths: Tensor, batch_size: int, seed: int, epoch: int,
                     block: int = 64) -> list[Tensor]:
    """The epoch's batches of ``index`` (sentence ids): a shuffled order (the engine's epoch rule) cut
    into blocks of ``block`` batches, each block sorted by length and cut into batches, the batches
    then shuffled; deterministic in (seed, epoch)."""
    out: list[Tensor] = []
    for chunk in epoch_batches(len(index), min(batch_size * block, len(index)), seed, epoch):
        ids = index[chunk]
        ids = ids[lengths[ids].argsort(stable=True)]
        out += [b for b in ids.split(batch_size) if len(b) >= 2]
    order = torch.randperm(len(out), generator=seeded_generator(seed, epoch=epoch, stream="mlm-blocks"))
    return [out[i] for i in order.tolist()]

def collate(idx: Tensor, tokens: Tensor, offsets: Tensor, max_length: int, cls_id: int, sep_id: int,
            pad_id: int = 0) -> tuple[Tensor, Tensor]:
    """(input ids, attention mask) of shape (B, T): [CLS] body [SEP] padding, bodies cut to ``max_length - 2``."""
    start = offsets[idx]
    n = (offsets[idx + 1] - start).clamp(max=max_length - 2)  # (B,)
    width = int(n.max()) + 2
    ar = torch.arange(width - 2)
    inside = ar[None, :] < n[:, None]  # (B, T-2)
    body = tokens[(start[:, None] + ar[None, :]).clamp(max=len(tokens) - 1)].long().masked_fill(~inside, pad_id)
    ids = torch.full((len(idx), width), pad_id, dtype=torch.long)
    ids[:, 0] = cls_id
    ids[:, 1:-1] = body
    ids.scatter_(1, (n + 1)[:, None], sep_id)
    attn = (torch.arange(width)[None, :] < (n + 2)[:, None]).long()
    return ids, attn

def mask_tokens(ids: Tensor, attn: Tensor, prob: float, vocab_size: int, gen: torch.Generator,
                mask_id: int, n_special: int = len(SPECIAL)) -> tuple[Tensor, Tensor]:
    """BERT's masking: ``prob`` of the non-special tokens are predicted; of those 80 % become [MASK],
    10 % a random non-special token, 10 % stay ([UNK] is predicted like any word; [PAD], [CLS], [SEP] and
    [MASK] never). Returns (inputs, labels with -100 elsewhere); at least one token of the batch is
    always predicted."""
    cand = attn.bool() & ((ids >= n_special) | (ids == UNK))
    r = torch.rand(ids.shape, generator=gen)
    sel = (r < prob) & cand
    if not sel.any():
        sel = cand & (r == r.masked_fill(~cand, 2.0).min())
    labels = ids.masked_fill(~sel, -100)
    r2 = torch.rand(ids.shape, generator=gen)
    inputs = ids.masked_fill(sel & (r2 < 0.8), mask_id)
    rnd = sel & (r2 >= 0.8) & (r2 < 0.9)
    inputs[rnd] = torch.randint(n_special, vocab_size, (int(rnd.sum()),), generator=gen)
    return inputs, labels
