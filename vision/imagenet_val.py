"""ImageNet's official validation layout: one flat folder (``val/ILSVRC2012_val_00000001.JPEG`` ...) labelled by
Kaggle's ``LOC_val_solution.csv`` or by the devkit's ``ILSVRC2012_validation_ground_truth.txt`` with its synset mapping
(``LOC_synset_mapping.txt`` or ``meta.mat``): where the label files are looked for and how they are read
(:func:`flat_val_labels`). :mod:`vision.sources` builds the folder's index from them."""
from __future__ import annotations

import csv
from pathlib import Path

VAL_SOLUTION = "LOC_val_solution.csv"  # Kaggle: ImageId,PredictionString ("<wnid> x0 y0 x1 y1 ..."), at its root
GROUND_TRUTH = "ILSVRC2012_validation_ground_truth.txt"  # the devkit: one 1-based ILSVRC2012_ID per image, in order
SYNSET_MAPPING = "LOC_synset_mapping.txt"  # Kaggle: "<wnid> <words>" per line, in ILSVRC2012_ID order
META_MAT = "meta.mat"  # the devkit's synsets (ILSVRC2012_ID, WNID, ...; the 1,000 classes have no children)
DEVKIT = "ILSVRC2012_devkit_t12"


def _label_places(split_dir: Path, root: Path) -> list[Path]:
    """Where the labels of a flat validation folder are looked for, in order: inside it, beside it (the data root),
    Kaggle's root (the folder holding ``ILSVRC/`` when the data is ``<kaggle>/ILSVRC/Data/CLS-LOC``) and the devkit's
    folder (``ILSVRC2012_devkit_t12/data``) in either."""
    bases = [split_dir, root, *(p.parent for p in root.parents if p.name == "ILSVRC")]
    places = [*bases, *(b / DEVKIT / "data" for b in bases[1:]), *(b / DEVKIT for b in bases[1:])]
    return list(dict.fromkeys(places))


def _find(name: str, places: list[Path]) -> Path | None:
    return next((p / name for p in places if (p / name).is_file()), None)


def _read_solution(path: Path) -> dict[str, str]:
    """{image id: wnid} of Kaggle's ``LOC_val_solution.csv`` (the class is PredictionString's first token)."""
    out: dict[str, str] = {}
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            rows = csv.reader(fh)
            header = [h.strip() for h in next(rows, [])]
            if header[:2] != ["ImageId", "PredictionString"]:
                raise ValueError(f"{path}: header {','.join(header)!r} is not ImageId,PredictionString (Kaggle's "
                                 f"{VAL_SOLUTION})")
            for line, row in enumerate(rows, start=2):
                if not row:
                    continue
                tokens = row[1].split() if len(row) >= 2 else []
                if not tokens:
                    raise ValueError(f"{path}: line {line} ({','.join(row)!r}) has no class in PredictionString")
                out[row[0].strip()] = tokens[0]
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise ValueError(f"{path} cannot be read as {VAL_SOLUTION} ({type(exc).__name__}: {exc})") from None
    return out


def _synset_ids(path: Path) -> dict[int, str]:
    """{ILSVRC2012_ID: wnid} of ``LOC_synset_mapping.txt`` (line i is id i) or the devkit's ``meta.mat``."""
    if path.suffix == ".mat":
        try:
            from scipy.io import loadmat

            synsets = loadmat(str(path), squeeze_me=True)["synsets"]
            return {int(s["ILSVRC2012_ID"]): str(s["WNID"]) for s in synsets if int(s["num_children"]) == 0}
        except Exception as exc:  # scipy's reader raises many kinds for a file that is not the devkit's
            raise ValueError(f"{path} is not the devkit's meta.mat (synsets with ILSVRC2012_ID, WNID, num_children): "
                             f"{type(exc).__name__}: {exc}") from None
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path} cannot be read ({type(exc).__name__}: {exc})") from None
    return {i: line.split()[0] for i, line in enumerate(lines, start=1) if line.strip()}


def _read_ground_truth(path: Path, ids: dict[int, str], mapping: Path) -> dict[str, str]:
    """{ILSVRC2012_val_<n>: wnid} of the devkit's ground truth (line n: the n-th image's 1-based ILSVRC2012_ID)."""
    out: dict[str, str] = {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path} cannot be read ({type(exc).__name__}: {exc})") from None
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            out[f"ILSVRC2012_val_{n:08d}"] = ids[int(line)]
        except ValueError:
            raise ValueError(f"{path}: line {n} ({line.strip()!r}) is not an ILSVRC2012_ID") from None
        except KeyError:
            raise ValueError(f"{path}: line {n}: ILSVRC2012_ID {int(line)} is not in {mapping} "
                             f"(ids 1..{len(ids)})") from None
    return out


def flat_val_labels(split_dir: str | Path, root: str | Path) -> tuple[dict[str, str], str]:
    """``({image stem: wnid}, where they came from)`` of ImageNet's official flat validation folder ``split_dir``:
    Kaggle's ``LOC_val_solution.csv``, else the devkit's ``ILSVRC2012_validation_ground_truth.txt`` with its synset
    mapping (``LOC_synset_mapping.txt`` or the devkit's ``meta.mat``), looked for inside ``split_dir``, beside it in
    ``root``, at Kaggle's root (beside ``ILSVRC/``) and in ``ILSVRC2012_devkit_t12/data``; neither is a
    ``ValueError`` of one line naming the files it needs."""
    split_dir, root = Path(split_dir), Path(root)
    places = _label_places(split_dir, root)
    solution = _find(VAL_SOLUTION, places)
    if solution is not None:
        return _read_solution(solution), str(solution)
    truth = _find(GROUND_TRUTH, places)
    mapping = _find(SYNSET_MAPPING, places) or _find(META_MAT, places)
    if truth is not None and mapping is not None:
        return _read_ground_truth(truth, _synset_ids(mapping), mapping), f"{truth} with {mapping}"
    need = (f"{GROUND_TRUTH} found ({truth}) but no {SYNSET_MAPPING} or {DEVKIT}/data/{META_MAT} to map its ids"
            if truth is not None else f"{VAL_SOLUTION} (Kaggle), or {GROUND_TRUTH} with {SYNSET_MAPPING} or "
            f"{META_MAT} (the devkit)")
    raise ValueError(f"{split_dir} holds images but no class folders: ImageNet's flat validation layout needs {need}, "
                     f"in {split_dir}, {root} or beside ILSVRC/ (or sort {split_dir} into <class>/ folders)")
