"""The synthetic data of ``make gpu-bench`` (:mod:`benchmarks.measurements.gpu_bench`), generated and seeded:
CIFAR-sized images in CIFAR-10's pickle layout, TU-like graphs, molecule-sized graphs with Hu et al.'s features,
sentences, and a BERT with random weights and a WordPiece vocabulary trained on them (no download)."""
from __future__ import annotations

import pickle
import random
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F


def write_cifar(root: Path, n: int, seed: int = 0) -> Path:
    """``n`` random 32 x 32 images in CIFAR-10's pickle layout (5 training batches, a test batch of n / 10)."""
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True, exist_ok=True)
    g = torch.Generator().manual_seed(seed)
    per = max(1, n // 5)
    for i in range(1, 7):
        m = per if i <= 5 else max(10, n // 10)
        x = torch.randint(0, 256, (m, 3 * 32 * 32), generator=g, dtype=torch.uint8).numpy()
        name = f"data_batch_{i}" if i <= 5 else "test_batch"
        with open(folder / name, "wb") as f:
            pickle.dump({"data": x, "labels": [j % 10 for j in range(m)]}, f)
    return root


def tu_graphs(n: int, nodes: int, seed: int = 0) -> Any:
    """A TU-like set: ``n`` connected random graphs of ``nodes`` nodes on average, 3 one-hot node labels, 2 classes."""
    from torch_geometric.data import Data

    from graph.tu.data import TUData

    rng = random.Random(seed)
    graphs = []
    for g in range(n):
        k = rng.randint(max(3, nodes // 2), nodes * 3 // 2)
        src = list(range(k - 1)) + [rng.randrange(k) for _ in range(k)]
        dst = list(range(1, k)) + [rng.randrange(k) for _ in range(k)]
        e = torch.tensor([src + dst, dst + src])
        e = e[:, e[0] != e[1]]
        x = F.one_hot(torch.tensor([rng.randrange(3) for _ in range(k)]), 3).float()
        graphs.append(Data(x=x, edge_index=e, y=torch.tensor([g % 2])))
    return TUData("GPUBENCH", graphs, 3, 2, "generated")


def mol_graphs(n: int, seed: int = 0) -> Any:
    """``n`` molecule-sized graphs (9-38 atoms, a chain plus rings) with Hu et al.'s feature columns, packed as the
    molecular front-end holds a featurised corpus (no RDKit needed)."""
    from graph.mol.data import HU, MolGraphs

    g = torch.Generator().manual_seed(seed)
    sizes = torch.randint(9, 39, (n,), generator=g)
    xs, es, eas, nptr, eptr = [], [], [], [0], [0]
    for k in sizes.tolist():
        xs.append(torch.stack([torch.randint(0, d, (k,), generator=g) for d in HU.atom_dims], 1))
        src = torch.cat([torch.arange(k - 1), torch.randint(0, k, (k // 6 + 1,), generator=g)])
        dst = torch.cat([torch.arange(1, k), torch.randint(0, k, (k // 6 + 1,), generator=g)])
        keep = src != dst
        e = torch.stack([torch.cat([src[keep], dst[keep]]), torch.cat([dst[keep], src[keep]])])
        es.append(e)
        eas.append(torch.stack([torch.randint(0, d - 2, (e.shape[1],), generator=g) for d in HU.bond_dims], 1))
        nptr.append(nptr[-1] + k)
        eptr.append(eptr[-1] + e.shape[1])
    return MolGraphs(torch.cat(xs).short(), torch.cat(es, 1).short(), torch.cat(eas).short(), torch.tensor(nptr),
                     torch.tensor(eptr), [""] * n)


WORDS = ("a the of and to in is was for on as with by he it at from his an were are which this also be has or had "
         "first one their its new after who they two her she been other when there all during into school time may "
         "years more most only over city some world would where later up such used many can state about national "
         "out known university united then made").split()


def sentences(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 40))) for _ in range(n)]


def write_bert(folder: Path, texts: list[str], layers: int, hidden: int, heads: int) -> Path:
    """A BERT of the given size with random weights and a WordPiece vocabulary trained on ``texts``, saved as a
    Hugging Face model folder (MiniLM-L6: 6 x 384, 12 heads, 1,536 intermediate)."""
    from transformers import BertConfig, BertModel

    from text.mlm.tokenizer import train_tokenizer

    tok = train_tokenizer(texts, 4096, folder)
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=len(tok), hidden_size=hidden, num_hidden_layers=layers,
                         num_attention_heads=heads, intermediate_size=4 * hidden, max_position_embeddings=512),
              add_pooling_layer=False).save_pretrained(folder)
    return folder
