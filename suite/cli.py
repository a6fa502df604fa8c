"""The ``suite`` command (also ``python -m suite``).

Built in: ``suite losses`` and ``suite results list|show|compare|export|import|merge|reap|plot``. Other packages add
sub-commands through the ``suite.cli`` entry-point group (``vision``, ``graph``, ``text``,
``bench``): each entry point is a function ``register(subparsers)`` that adds its parser and sets
``func``. ``suite`` itself never imports them statically.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from importlib import metadata
from pathlib import Path
from typing import Any, Iterator, Sequence

from suite.faults import RunFault
from suite.registry import STATUSES, Registry, markdown_table, open_registry


class _Parser(argparse.ArgumentParser):
    """``argparse`` with one-line errors (the message and where the usage is, not the whole usage block); every
    sub-command's parser is one too (``add_subparsers`` makes parsers of the parent's class)."""

    def error(self, message: str) -> Any:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def _cmd_losses(args: argparse.Namespace) -> int:
    import suite.losses as L

    rows = []
    for name in L.available():
        cls = L.loss_class(name)
        kind = "multi-view (V, N, d)" if cls.multi_view else "two-view (N, d)"
        extra = ", ".join(cls.requires)
        hp = ", ".join(f"{k}={v}" for k, v in L.defaults(name).items())
        doc = ((sys.modules[cls.__module__].__doc__ or cls.__doc__ or "-").strip() or "-").splitlines()[0]
        if name in L.plugins():
            doc = f"{doc} (installed: {L.plugins()[name]})"
        fused = getattr(cls, "fused_tiles", "no")
        rows.append([name, kind, extra or "-", "sphere" if cls.hypersphere else "euclidean", hp, fused, doc])
    al = L.aliases()
    print(markdown_table(["loss", "input", "needs", "space", "defaults", "fused GPU tiles", "reference"], rows))
    print("fused GPU tiles: the tiled path (chunk_size) on a CUDA device runs Triton kernels (suite.losses.fused); "
          "'part': some of its terms, 'no': PyTorch tiles")
    print("aliases: " + ", ".join(f"{a} -> {n}" for a, n in sorted(al.items())))
    from suite.losses.registry import plugin_errors

    for name, why in sorted(plugin_errors().items()):  # an installed loss left out: said, never a failed listing
        print(f"left out: {why}")
    return 0


def _filters(args: argparse.Namespace) -> dict[str, Any]:
    return {k: getattr(args, k) for k in ("modality", "task", "dataset", "loss", "status") if getattr(args, k, None)}


def _file_target(path: str | Path, doing: str) -> Path:
    """A file a command is about to write (an export, a merged snapshot): a ``ValueError`` starting with ``doing``
    when it is a folder or its folder is missing, before anything is written."""
    p = Path(path)
    if not p.parent.is_dir():
        raise ValueError(f"{doing}: folder {p.parent} not found")
    if p.is_dir():
        raise ValueError(f"{doing}: it is a folder")
    return p


def _reason(exc: OSError) -> str:
    return os.strerror(exc.errno) if exc.errno else str(exc)


def _cmd_results(args: argparse.Namespace) -> int:
    ids = list(args.run_id or [])
    if args.action == "plot":
        return _plot(args, ids)
    if len(ids) > 1:
        print(f"suite results {args.action}: give one run id or file, got {len(ids)}", file=sys.stderr)
        return 2
    args.run_id = ids[0] if ids else None
    if args.action == "import":
        if not args.run_id:
            print("suite results import: give the .jsonl file (from `suite results export --format jsonl`)", file=sys.stderr)
            return 2
        from suite.registry import check_snapshot

        rows = check_snapshot(args.run_id)  # every row checked before the registry is opened (or created): a bad
        reg = Registry(args.registry)       # line imports nothing and leaves no new empty database behind
        n = reg.import_jsonl(args.run_id, checked=rows)
        print(f"imported {n['added']} runs into {reg.shown}; {n['skipped']} already there (same id) skipped")
        return 0
    if args.action == "merge":
        if not args.run_id:
            print("suite results merge: give the .jsonl snapshot to merge this registry's runs into", file=sys.stderr)
            return 2
        from suite.registry import check_snapshot, merge_into_snapshot

        snap = _file_target(args.run_id, f"cannot merge into {args.run_id}")
        rows = check_snapshot(snap, nothing="nothing merged") if snap.exists() else []  # before the registry opens
        reg = open_registry(args.registry)
        try:  # a full disk leaves the snapshot as it was, never half a file
            n = merge_into_snapshot(snap, reg.export_jsonl(**_filters(args)), checked=rows)
        except OSError as exc:
            raise ValueError(f"cannot merge into {snap}: {_reason(exc)} (the snapshot is kept as it was)") from None
        print(f"merged {reg.shown} into {args.run_id}: {n['added']} runs added, {n['changed']} changed (resumed or "
              f"superseded), {n['kept']} unchanged; {n['running']} still running left out")
        return 0
    reg = open_registry(args.registry)
    if args.action in ("list", "reap"):  # runs whose process is gone are interrupted, not running forever
        n = reg.reap()
        if n["runs"] or n["jobs"] or args.action == "reap":
            print(f"reaped: {n['runs']} runs and {n['jobs']} benchmark jobs whose process is gone marked interrupted",
                  file=sys.stderr if args.action == "list" else sys.stdout)
        if args.action == "reap":
            return 0
    if args.action == "list":
        rows = [[r["id"][:10], r["status"], r["modality"], r["task"], r["dataset"], r["loss"], r["seed"],
                 r["started_at"][:19], f"{r['wall_time']:.1f}" if r["wall_time"] is not None else ""]
                for r in reg.runs(**_filters(args))]
        print(markdown_table(["id", "status", "modality", "task", "dataset", "loss", "seed", "started", "wall s"], rows))
    elif args.action == "show":
        if not args.run_id:
            print("suite results show: give a run id (prefix)", file=sys.stderr)
            return 2
        try:
            run = reg.get(args.run_id)
        except KeyError as exc:
            raise ValueError(f"{exc.args[0]} in the registry {reg.shown} (see `suite results list`)") from None
        from suite.inputs import recorded_data

        if data := recorded_data(run):  # the data the run read, by name: its fingerprint first
            run = {"data": {k: {"digest": v.get("digest"), "kind": v.get("kind"), "path": v.get("path")}
                            for k, v in data.items() if isinstance(v, dict)}, **run}
        print(json.dumps(run, indent=2, default=str))
    elif args.action == "compare":
        metric = args.metric
        rows = reg.compare(metric, split=args.split, **_filters(args))
        print(markdown_table(["modality", "task", "dataset", "loss", "metric", "n", "mean ± std", "seeds"],
                             [[r["modality"], r["task"], r["dataset"], r["loss"], r["metric"], r["n"],
                               f"{r['mean']:.4f} ± {r['std']:.4f}", " ".join(map(str, r["seeds"]))] for r in rows]))
    elif args.action == "export":
        text = reg.export(args.format, **_filters(args))
        if args.out:
            from suite.safeio import write_atomic

            _file_target(args.out, f"cannot write the export to {args.out}")
            try:  # a full disk leaves an earlier export as it was, never half a file
                write_atomic(args.out, text, what="the export")
            except OSError as exc:
                raise ValueError(f"cannot write the export to {args.out}: {_reason(exc)} (an earlier file there is "
                                 "kept)") from None
            print(f"wrote {args.out}")
        else:
            print(text)
    return 0


def _plot(args: argparse.Namespace, ids: list[str]) -> int:
    """``suite results plot RUN_ID [RUN_ID ...] --metric loss``: the step curves of the runs (split ``train-step``,
    or ``--split``) in one figure, each labelled by its setting (task, dataset, loss, seed); PNG or SVG by ``--out``."""
    if not ids:
        print("suite results plot: give one or more run ids (prefixes; see `suite results list`)", file=sys.stderr)
        return 2
    out = Path(args.out or f"curves-{args.metric}.png")
    if out.suffix.lower() not in (".png", ".svg"):
        raise ValueError(f"suite results plot: --out {out} must end in .png or .svg")
    _file_target(out, f"cannot write the figure to {out}")
    reg = open_registry(args.registry)
    split = args.split or "train-step"
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    for rid in ids:
        try:
            run = reg.get(rid)
        except KeyError as exc:
            raise ValueError(f"{exc.args[0]} in the registry {reg.shown} (see `suite results list`)") from None
        pts = reg.curve(run["id"], args.metric, split)
        if not pts:
            raise ValueError(f"run {run['id'][:10]} has no {args.metric!r} curve in split {split!r} (runs log step "
                             f"curves every log_every steps since issue 51; older runs have only per-epoch values: "
                             f"--split train)")
        label = f"{run['task']} {run['dataset']} {run['loss']} s{run['seed']} ({run['id'][:6]})"
        ax.plot([p[0] for p in pts], [p[1] for p in pts], lw=1.2, label=label)
    ax.set_xlabel("optimiser step" if split == "train-step" else "step", fontsize=9)
    ax.set_ylabel(f"{args.metric} ({split})", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    print(f"wrote {out}")
    return 0


def walk_commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ("suite",)
                  ) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every command of the tree under ``parser`` with its path (``("suite", "graph", "tu")``), depth first."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from walk_commands(sub, path + (name,))


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The full parser; with ``only`` set, load just that plugin (front-ends import heavy libraries)."""
    p = _Parser(prog="suite", description="Contrastive representation learning suite")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    pl = sub.add_parser("losses", help="list the registered losses with their hyper-parameters")
    pl.set_defaults(func=_cmd_losses)

    pr = sub.add_parser("results", help="query the results registry")
    pr.add_argument("action", choices=["list", "show", "compare", "export", "import", "merge", "reap", "plot"],
                    help="plot RUN_ID ...: the runs' step curves of --metric in one figure (--out .png or .svg); "
                         "reap: mark runs whose process is gone (on this host) as interrupted; list does it too; "
                         "import FILE.jsonl: add the runs of a snapshot (export --format jsonl), skipping ids present; "
                         "merge FILE.jsonl: add this registry's new runs to a snapshot and update those resumed or "
                         "superseded, every other line kept (runs of several trees into one committed snapshot)")
    pr.add_argument("run_id", nargs="*", help="run id or prefix (for show; several for plot); the .jsonl file (for "
                                              "import and merge)")
    pr.add_argument("--registry", default=None, help="registry path or SQLAlchemy URL (default $SUITE_REGISTRY); "
                                                     "a .jsonl snapshot for list/show/compare/export")
    for k in ("modality", "task", "dataset", "loss"):
        pr.add_argument(f"--{k}", default=None)
    pr.add_argument("--status", default=None, choices=STATUSES)
    pr.add_argument("--metric", default="acc", help="metric to compare (default acc)")
    pr.add_argument("--split", default=None, help="metric split to compare (e.g. test)")
    pr.add_argument("--format", choices=["csv", "md", "json", "jsonl"], default="md")
    pr.add_argument("--out", default=None, help="write the export to this file")
    pr.set_defaults(func=_cmd_results)

    for ep in sorted(metadata.entry_points(group="suite.cli"), key=lambda e: e.name):
        if only is not None and ep.name != only:
            continue
        try:
            register = ep.load()
            register(sub)
        except Exception as exc:  # an extra not installed: say so when invoked
            bad = sub.add_parser(ep.name, help=f"(unavailable: {type(exc).__name__})")
            bad.set_defaults(func=lambda a, e=exc, n=ep.name: _unavailable(n, e))
    return p


def _unavailable(name: str, exc: Exception) -> int:
    print(f"suite {name}: could not load ({type(exc).__name__}: {exc}). Install the extra: pip install -e '.[{name}]'",
          file=sys.stderr)
    return 2


def follow_runner() -> None:
    """A job started by ``suite bench run`` (``$SUITE_RUNNER_PID``) asks Linux for SIGTERM when the runner dies,
    even by SIGKILL (``PR_SET_PDEATHSIG``), and exits at once if the runner is already gone: an orphaned job never
    keeps running and records a finished run behind a re-run of the same job."""
    want = os.environ.pop("SUITE_RUNNER_PID", None)  # for this process only, not for what it starts
    if not want or not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGTERM), 0, 0, 0)  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError, ValueError):
        return
    if str(os.getppid()) != want:  # the runner died before the request took effect
        print(f"suite: the benchmark runner (pid {want}) is gone; not starting", file=sys.stderr)
        raise SystemExit(130)


def main(argv: Sequence[str] | None = None) -> int:
    follow_runner()
    argv = list(sys.argv[1:] if argv is None else argv)
    plugins = {ep.name for ep in metadata.entry_points(group="suite.cli")}
    first = next((a for a in argv if not a.startswith("-")), None)
    if first is not None and first not in plugins and first not in ("losses", "results"):
        print(f"suite: error: unknown command {first!r}; commands: {', '.join(sorted(plugins | {'losses', 'results'}))} "
              "(see `suite --help`)", file=sys.stderr)
        return 2
    parser = build_parser(only=first if first in plugins else None if first is None else "")
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 1
    try:
        return int(args.func(args) or 0)
    except ValueError as exc:  # bad input: a clear message, no traceback (a user's loss: its own lines, that help)
        frames = getattr(exc, "user_frames", None)
        if frames:
            print("Traceback of your loss (most recent call last):\n" + "\n".join(frames), file=sys.stderr)
        print(f"error: {_one_line(str(exc))}", file=sys.stderr)
        return 2
    except (FloatingPointError, MemoryError, RunFault) as exc:  # a run that failed (a loss turned NaN, the GPU): one line
        print(f"error: {_one_line(str(exc)) or 'out of memory'}", file=sys.stderr)
        return 1
    except OSError as exc:  # a missing, unreadable or unwritable path, a full disk: named, no traceback
        where = f": {exc.filename}" if exc.filename and str(exc.filename) not in str(exc.strerror) else ""
        print(f"error: {_one_line(str(exc.strerror or exc))}{where}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM: one line (where a run resumes), no traceback
        folder, last = getattr(exc, "run_folder", None), getattr(exc, "run_checkpoint", None)
        where = ("" if folder is None else
                 f": the run in {folder} resumes from its checkpoint {last.name} when the same command is run again"
                 if last is not None else f": no checkpoint of the run in {folder} was written yet, so the same "
                 f"command starts it over")
        print(f"suite: interrupted ({_one_line(str(exc)) or 'Ctrl-C'}){where}", file=sys.stderr)
        return 130
    finally:
        _end_distributed()


def _end_distributed() -> None:
    """The process group a run owner set up under torchrun ends with the command (never imports torch itself)."""
    if "torch.distributed" in sys.modules:
        from suite import distributed as sd

        sd.cleanup()


def _one_line(text: str) -> str:
    """A message on one line (a library's multi-line text joined with ' | ')."""
    return " | ".join(line.strip() for line in text.strip().splitlines() if line.strip())
