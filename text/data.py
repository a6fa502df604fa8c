"""Readers for the text front-end, in SentEval's ``data/downstream`` layout.

- :func:`read_sentences`: one sentence per line (SimCSE's wiki1m format), blank lines skipped.
- :func:`read_sts_year`: STS12-16 ``STS.input.<set>.txt`` (two tab-separated sentences) and
  ``STS.gs.<set>.txt`` (one gold score per line); pairs whose gold score is empty are skipped and
  counted, as SentEval does.
- :func:`read_stsb` (``STSBenchmark/sts-{train,dev,test}.csv``, tab-separated, score in column 5,
  sentences in 6 and 7) and :func:`read_sick` (``SICK_{train,trial,test_annotated}.txt`` with header).
- :func:`read_transfer`: MR, CR, SUBJ, MPQA, SST2, TREC, MRPC as SentEval reads them.
- :func:`nli_triplets`: (anchor, entailment, contradiction) triplets from SNLI's ``s1/s2/labels``
  files and SICK's entailment annotations; :func:`read_triplets_csv` for any CSV of triplets.

Sentences are whitespace-normalised (``" ".join(s.split())``): SentEval hands tokens to the
batcher, and SimCSE's batcher joins them with single spaces.
"""
from __future__ import annotations

import csv
import hashlib
import io
from dataclasses import dataclass, field
from pathlib import Path

from suite.paths import data_path, data_root, missing_root_note
from suite.safeio import read_text

STS_YEARS: dict[str, tuple[str, ...]] = {
    "STS12": ("MSRpar", "MSRvid", "SMTeuroparl", "surprise.OnWN", "surprise.SMTnews"),
    "STS13": ("FNWN", "headlines", "OnWN"),
    "STS14": ("deft-forum", "deft-news", "headlines", "images", "OnWN", "tweet-news"),
    "STS15": ("answers-forums", "answers-students", "belief", "headlines", "images"),
    "STS16": ("answer-answer", "headlines", "plagiarism", "postediting", "question-question"),
}
TRANSFER_TASKS = ("MR", "CR", "SUBJ", "MPQA", "SST2", "TREC", "MRPC")


def senteval_root() -> Path:
    return data_path("senteval", "downstream")


# the folder under the SentEval root each task reads (its files and nothing of another task's)
TASK_FOLDERS = {**{y: f"STS/{y}-en-test" for y in STS_YEARS}, "STSB": "STS/STSBenchmark",
                "STSB-dev": "STS/STSBenchmark", "SICKR": "SICK", "SST2": "SST/binary",
                **{t: t for t in ("MR", "CR", "SUBJ", "MPQA", "TREC", "MRPC")}}


def task_folder(task: str, root: Path | None = None) -> Path:
    """The folder an STS or transfer task reads, the data its evaluation's identity covers."""
    if task not in TASK_FOLDERS:
        raise ValueError(f"unknown SentEval task {task!r}; valid: {list(TASK_FOLDERS)}")
    return (root or senteval_root()) / TASK_FOLDERS[task]


def _norm(s: str) -> str:
    return " ".join(s.split())


class DataFileMissing(FileNotFoundError, ValueError):
    """A data file that is not there (a ``ValueError`` too, so the CLI prints one line, no traceback)."""


def _require(path: Path) -> Path:
    if not path.exists():
        try:  # a file of the data root: say where the root is looked for; a path the user typed: only that it is missing
            ours = path.resolve().is_relative_to(data_root().resolve())
        except (OSError, ValueError):
            ours = False
        hint = missing_root_note() or ("is SUITE_DATA set to the data root?" if ours else "")
        raise DataFileMissing(f"data file not found: {path}" + (f" ({hint})" if hint else ""))
    return path


def _read(path: Path, encoding: str = "utf-8") -> str:
    """The text of a data file; a binary file or bytes that are not ``encoding`` raise a one-line
    ``ValueError`` naming the file and line (:func:`suite.safeio.read_text`)."""
    return read_text(_require(Path(path)), encoding)


@dataclass
class PairSet:
    """Scored sentence pairs: ``a[i]``, ``b[i]``, gold ``scores[i]``; ``skipped`` = pairs without a gold score."""

    name: str
    a: list[str]
    b: list[str]
    scores: list[float]
    skipped: int = 0

    def __len__(self) -> int:
        return len(self.scores)


@dataclass
class LabelledSet:
    """Sentences (or pairs: ``b`` not None) with integer labels."""

    name: str
    x: list[str]
    y: list[int]
    b: list[str] | None = None
    classes: list[str] = field(default_factory=list)


def read_sentences(path: str | Path, limit: int | None = None) -> list[str]:
    """One sentence per line; empty lines are skipped. ``limit`` keeps the first ``limit`` sentences."""
    lines = [_norm(s) for s in _read(Path(path), "utf-8").splitlines()]
    out = [s for s in lines if s]
    if not out:
        raise ValueError(f"no sentences in {path}")
    return out[:limit] if limit else out


def read_sts_pairs(input_file: str | Path, gs_file: str | Path, name: str = "") -> PairSet:
    """One STS12-16 sub-set. Lines of the input and gold files correspond one to one."""
    inputs = _read(Path(input_file), "utf-8").splitlines()
    gold = _read(Path(gs_file), "utf-8").splitlines()
    if len(inputs) != len(gold):
        raise ValueError(f"{input_file} has {len(inputs)} lines but {gs_file} has {len(gold)}")
    a, b, scores, skipped = [], [], [], 0
    for lineno, (line, g) in enumerate(zip(inputs, gold), 1):
        if not g.strip():
            skipped += 1
            continue
        parts = line.split("\t")
        if len(parts) < 2:
            raise ValueError(f"{input_file}:{lineno}: expected two tab-separated sentences")
        a.append(_norm(parts[0]))
        b.append(_norm(parts[1]))
        scores.append(float(g))
    return PairSet(name or Path(input_file).stem, a, b, scores, skipped)


def read_sts_year(year: str, root: Path | None = None) -> dict[str, PairSet]:
    """All sub-sets of ``STS12`` ... ``STS16`` (SentEval's order)."""
    if year not in STS_YEARS:
        raise ValueError(f"unknown STS year {year!r}; valid: {list(STS_YEARS)}")
    d = (root or senteval_root()) / "STS" / f"{year}-en-test"
    return {s: read_sts_pairs(d / f"STS.input.{s}.txt", d / f"STS.gs.{s}.txt", name=s) for s in STS_YEARS[year]}


def read_stsb(split: str = "test", root: Path | None = None) -> PairSet:
    """STS Benchmark ``sts-<split>.csv``: tab-separated, gold in column 5, sentences in 6 and 7."""
    if split not in ("train", "dev", "test"):
        raise ValueError(f"STS-B split must be train, dev or test, got {split!r}")
    path = _require((root or senteval_root()) / "STS" / "STSBenchmark" / f"sts-{split}.csv")
    a, b, scores = [], [], []
    for lineno, line in enumerate(_read(path, "utf-8").splitlines(), 1):
        cols = line.strip().split("\t")
        if len(cols) < 7:
            raise ValueError(f"{path}:{lineno}: expected >= 7 tab-separated columns, got {len(cols)}")
        scores.append(float(cols[4]))
        a.append(_norm(cols[5]))
        b.append(_norm(cols[6]))
    return PairSet(f"STSB-{split}", a, b, scores)


SICK_FILES = {"train": "SICK_train.txt", "trial": "SICK_trial.txt", "test": "SICK_test_annotated.txt"}


def _sick_rows(split: str, root: Path | None) -> list[list[str]]:
    if split not in SICK_FILES:
        raise ValueError(f"SICK split must be one of {list(SICK_FILES)}, got {split!r}")
    path = _require((root or senteval_root()) / "SICK" / SICK_FILES[split])
    rows = [line.split("\t") for line in _read(path, "utf-8").splitlines()[1:] if line.strip()]
    bad = [i for i, r in enumerate(rows) if len(r) < 5]
    if bad:
        raise ValueError(f"{path}: {len(bad)} row(s) with < 5 columns, first at data row {bad[0] + 1}")
    return rows


def read_sick(split: str = "test", root: Path | None = None) -> PairSet:
    """SICK relatedness: ``pair_ID, sentence_A, sentence_B, relatedness_score, entailment_judgment``."""
    rows = _sick_rows(split, root)
    return PairSet(f"SICK-{split}", [_norm(r[1]) for r in rows], [_norm(r[2]) for r in rows], [float(r[3]) for r in rows])


def unlabelled_sentences(root: Path | None = None) -> list[str]:
    """The unique sentences of the STS-B and SICK training splits (SimCSE's optional extra text)."""
    stsb, sick = read_stsb("train", root), read_sick("train", root)
    return list(dict.fromkeys(stsb.a + stsb.b + sick.a + sick.b))


# ----------------------------------------------------------------------------- transfer tasks

def _lines(path: Path, encoding: str = "utf-8") -> list[str]:
    return [_norm(s) for s in _read(path, encoding).splitlines() if s.strip()]


def _binary(name: str, pos: Path, neg: Path, encoding: str = "utf-8") -> LabelledSet:
    p, n = _lines(pos, encoding), _lines(neg, encoding)
    return LabelledSet(name, p + n, [1] * len(p) + [0] * len(n), classes=["neg", "pos"])


def _sst2(root: Path) -> dict[str, LabelledSet]:
    out = {}
    for split in ("train", "dev", "test"):
        x, y = [], []
        for line in _read(root / "SST" / "binary" / f"sentiment-{split}", "utf-8").splitlines():
            if not line.strip():
                continue
            s, lab = line.rstrip("\n").rsplit("\t", 1)
            x.append(_norm(s))
            y.append(int(lab))
        out[split] = LabelledSet(f"SST2-{split}", x, y, classes=["neg", "pos"])
    return out


def _trec(root: Path) -> dict[str, LabelledSet]:
    classes = ["ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM"]
    out = {}
    for split, fname in (("train", "train_5500.label"), ("test", "TREC_10.label")):
        x, y = [], []
        for line in _read(root / "TREC" / fname, "latin-1").splitlines():
            if not line.strip():
                continue
            target, rest = line.strip().split(":", 1)
            x.append(_norm(rest.split(" ", 1)[1]))
            y.append(classes.index(target))
        out[split] = LabelledSet(f"TREC-{split}", x, y, classes=classes)
    return out


def _mrpc(root: Path) -> dict[str, LabelledSet]:
    out = {}
    for split in ("train", "test"):
        path = _require(root / "MRPC" / f"msr_paraphrase_{split}.txt")
        a, b, y = [], [], []
        for line in _read(path, "utf-8-sig").splitlines()[1:]:
            cols = line.split("\t")
            if len(cols) < 5:
                continue
            y.append(int(cols[0]))
            a.append(_norm(cols[3]))
            b.append(_norm(cols[4]))
        out[split] = LabelledSet(f"MRPC-{split}", a, y, b=b, classes=["no", "paraphrase"])
    return out


def read_transfer(task: str, root: Path | None = None) -> dict[str, LabelledSet]:
    """SentEval transfer data. Single-set tasks (MR, CR, SUBJ, MPQA) return ``{"all": ...}``;
    SST2 ``{"train", "dev", "test"}``; TREC and MRPC ``{"train", "test"}``."""
    r = root or senteval_root()
    if task == "MR":
        return {"all": _binary("MR", r / "MR" / "rt-polarity.pos", r / "MR" / "rt-polarity.neg", "latin-1")}
    if task == "CR":
        return {"all": _binary("CR", r / "CR" / "custrev.pos", r / "CR" / "custrev.neg", "latin-1")}
    if task == "SUBJ":  # objective = 0, subjective = 1 as in SentEval
        s = _binary("SUBJ", r / "SUBJ" / "subj.subjective", r / "SUBJ" / "subj.objective", "latin-1")
        s.classes = ["objective", "subjective"]
        return {"all": s}
    if task == "MPQA":
        return {"all": _binary("MPQA", r / "MPQA" / "mpqa.pos", r / "MPQA" / "mpqa.neg", "latin-1")}
    if task == "SST2":
        return _sst2(r)
    if task == "TREC":
        return _trec(r)
    if task == "MRPC":
        return _mrpc(r)
    raise ValueError(f"unknown transfer task {task!r}; valid: {list(TRANSFER_TASKS)}")


# ----------------------------------------------------------------------------- NLI triplets

Triplet = tuple[str, str, str]


def _group_triplets(rows: list[tuple[str, str, str]]) -> list[Triplet]:
    """rows (premise, hypothesis, label) -> one triplet per (premise, entailment) with the premise's
    first contradiction as hard negative; premises lacking either are dropped."""
    ent: dict[str, list[str]] = {}
    con: dict[str, str] = {}
    for p, h, lab in rows:
        if lab == "entailment":
            ent.setdefault(p, []).append(h)
        elif lab == "contradiction":
            con.setdefault(p, h)
    return [(p, h, con[p]) for p, hs in ent.items() if p in con for h in hs]


def snli_triplets(splits: tuple[str, ...] = ("dev", "test"), root: Path | None = None) -> list[Triplet]:
    d = (root or senteval_root()) / "SNLI"
    rows: list[tuple[str, str, str]] = []
    for s in splits:
        s1, s2, lab = (_read(d / f"{k}.{s}", "utf-8").splitlines() for k in ("s1", "s2", "labels"))
        if not len(s1) == len(s2) == len(lab):
            raise ValueError(f"SNLI {s}: s1/s2/labels have {len(s1)}/{len(s2)}/{len(lab)} lines")
        rows += [(_norm(a), _norm(b), c.strip().lower()) for a, b, c in zip(s1, s2, lab)]
    return _group_triplets(rows)


def sick_triplets(splits: tuple[str, ...] = ("train", "trial"), root: Path | None = None) -> list[Triplet]:
    """Triplets from SICK's entailment judgments (train + trial by default: SICK-R test stays unseen)."""
    rows = [(_norm(r[1]), _norm(r[2]), r[4].strip().lower()) for s in splits for r in _sick_rows(s, root)]
    return _group_triplets(rows)


def nli_triplets(root: Path | None = None) -> list[Triplet]:
    """The local stand-in for SimCSE's NLI data: SNLI dev+test and SICK train+trial triplets."""
    return snli_triplets(root=root) + sick_triplets(root=root)


def read_supervised_csv(path: str | Path) -> list[tuple[str, ...]]:
    """A CSV of triplets, header ``sent0,sent1,hard_neg`` (SimCSE's nli_for_simcse.csv) or any 3 columns, or of pairs
    (``anchor,positive`` or any 2 columns: in-batch negatives only), every row as wide as the first; a row of another
    width, an empty cell or bytes that are not UTF-8 is a ValueError naming the file and line."""
    reader = csv.reader(io.StringIO(_read(Path(path)), newline=""))
    rows = [(reader.line_num, r) for r in reader if r]  # (line in the file, cells); blank lines skipped
    if not rows:
        raise ValueError(f"no rows in {path} (expected a header sent0,sent1,hard_neg and one triplet per line, or "
                         f"anchor,positive and one pair per line)")
    head = [c.strip().lower() for c in rows[0][1]]
    body = rows[1:] if head[:1] in (["sent0"], ["anchor"], ["premise"]) else rows
    if not body:
        raise ValueError(f"no triplets or pairs in {path}: it holds only its header")
    width = len(body[0][1]) if len(body[0][1]) in (2, 3) else 3
    short = [(i, len(r)) for i, r in body if len(r) < width]
    if short:
        raise ValueError(f"{path}, line {short[0][0]}: {short[0][1]} column{'s' if short[0][1] != 1 else ''}, a triplet "
                         f"needs 3 (anchor, positive, hard negative), a pair 2"
                         f"{f' (line {body[0][0]} has {width})' if width != 3 else ''}; {len(short)} such row(s)")
    long = [(i, len(r)) for i, r in body if len(r) > width]
    if long:  # an unquoted comma in a sentence: the cells after it would shift into the wrong roles
        raise ValueError(f"{path}, line {long[0][0]}: {long[0][1]} columns, a triplet has 3 (anchor, positive, hard "
                         f"negative){f' and line {body[0][0]} is a pair' if width == 2 else ''}; quote a sentence that "
                         f"holds a comma (\"a man, tall\"); {len(long)} such row(s)")
    out = [(i, tuple(_norm(c) for c in r)) for i, r in body]
    empty = [i for i, t in out if not all(t)]
    if empty:
        raise ValueError(f"{path}, line {empty[0]}: a {'triplet' if width == 3 else 'pair'} with an empty sentence; "
                         f"{len(empty)} such row(s)")
    return [t for _, t in out]


def read_triplets_csv(path: str | Path) -> list[Triplet]:
    """:func:`read_supervised_csv` of a file that must hold triplets."""
    rows = read_supervised_csv(path)
    if len(rows[0]) != 3:
        raise ValueError(f"{path}: pairs, where triplets (anchor, positive, hard negative) are needed")
    return rows  # type: ignore[return-value]


def text_hash(texts: list[str]) -> str:
    """Stable hash of a list of sentences (embedding-cache key)."""
    h = hashlib.sha256()
    for t in texts:
        h.update(t.encode("utf-8"))
        h.update(b"\x00")
    return h.hexdigest()[:16]
