"""The published numbers the claims' minimum effects are read from, as data (no imports): the catalogue declares a
metric's minimum effect from the published between-seed spread of its baseline, and the tables print them beside
ours (:mod:`benchmarks.tables.graph_molnet`, :mod:`benchmarks.tables.graph_tu` re-export them)."""
from __future__ import annotations

# Hu et al. 2020 Table 1, no pretraining: the standard deviation over their 10 seeds (the harness check's band).
PUBLISHED_STD_NONE = {"bbbp": 4.5, "tox21": 0.8, "toxcast": 0.6, "sider": 1.6, "clintox": 4.4, "muv": 2.5, "hiv": 1.9,
                      "bace": 5.4}

PUBLISHED_TU = {  # You et al. 2020 (GraphCL, mean ± std) and Huang et al. 2023 (GraphCL + MACL, Table 4)
    "MUTAG": ((86.80, 1.34), (89.04, 0.98)), "PROTEINS": ((74.39, 0.45), (74.47, 0.85)),
    "NCI1": ((77.87, 0.41), (78.41, 0.47)), "DD": ((78.62, 0.40), (78.80, 0.66)),
    "IMDB-BINARY": ((71.14, 0.44), (71.42, 1.05)), "REDDIT-BINARY": ((89.53, 0.84), (90.59, 0.36)),
}
