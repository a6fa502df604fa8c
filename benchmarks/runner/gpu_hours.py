"""GPU-hours of a suite's GPU jobs for ``bench run --dry-run``, from measured step rates only.

A job's GPU-hours are ``epochs x training images / (images per second per GPU) / 3600``: the images from the suite's
``data:`` root the job's ``dataset`` names (its ``images``), the rate from the registry's newest GPU measurement of
the same encoder at the same crop size (task ``image-loader``, metric ``gpu_step_images_per_s``: the step fed from
JPEG files on one GPU, :mod:`benchmarks.measurements.image_loader`). Where nothing was measured the job is listed as
not estimated, with what would measure it: a figure is never guessed.
"""
from __future__ import annotations

import json
import re
from typing import Any

from benchmarks.runner.suitefile import Job, data_of, resources_of

RATE_TASK, RATE_METRIC = "image-loader", "gpu_step_images_per_s"


def measured_rates(reg: Any) -> dict[tuple[str, int], dict[str, Any]]:
    """{(encoder, image size): the newest GPU row's rate, device and code version} of the registry."""
    out: dict[tuple[str, int], dict[str, Any]] = {}
    for run in reg.runs(task=RATE_TASK):
        cfg = json.loads(run.get("config") or "{}")
        if not cfg.get("gpu"):
            continue
        rate = next((m["value"] for m in reg.metrics(run["id"]) if m["name"] == RATE_METRIC), None)
        if rate:
            key = (str(cfg.get("encoder")), int(cfg.get("image_size", 0)))
            if key not in out or str(run.get("ended_at") or "") > out[key]["ended_at"]:
                out[key] = {"rate": float(rate), "device": cfg.get("gpu"), "code": run.get("code_version"),
                            "ended_at": str(run.get("ended_at") or "")}
    return out


def _root(job: Job) -> str | None:
    """The data root (placeholder) a job's dataset names, e.g. 'imagenet' for folder:{imagenet}."""
    m = re.search(r"\{(\w+)\}", str(dict(job.args).get("dataset", "")))
    return m.group(1) if m else None


def _one(job: Job, data: dict[str, dict[str, Any]], rates: dict[tuple[str, int], dict[str, Any]]
         ) -> tuple[tuple[str, int], float | None, str]:
    """(rate key, GPU-hours or None, the line's text) of one GPU job: ``epochs x images / rate / 3600`` over its
    GPUs' summed time; None where no rate of its encoder and crop size was measured, its data has no size, or it
    trains on other than two views (the rate is measured on two)."""
    args = dict(job.args)
    key = (str(args.get("encoder", "resnet18")), int(args.get("image-size") or 224))
    images = data.get(_root(job) or "", {}).get("images")
    views = int(args.get("views") or 2)
    if key not in rates:
        return key, None, (f"not estimated: no step rate of {key[0]} at {key[1]} measured on a GPU in the registry "
                           f"(make gpu-all measures one: task {RATE_TASK})")
    if not images:
        return key, None, "not estimated: its data root declares no image count (data: ... images:)"
    if views != 2:
        return key, None, f"not estimated: it trains on {views} views, the measured rate is of 2"
    r = rates[key]
    hours = float(args.get("epochs", 1)) * images / r["rate"] / 3600
    return key, hours, (f"{hours:,.0f} ({args.get('epochs', 1)} epochs x {images:,} images at {r['rate']:,.0f} "
                        f"images/s per GPU, {key[0]} at {key[1]} measured on {r['device']} at {r['code']})")


def job_hours(path: str, jobs: list[Job], reg: Any) -> dict[str, str]:
    """{job hash: its GPU-hours line} of the suite's GPU jobs of the vision front-end (see :func:`_one`)."""
    data, rates = data_of(path), measured_rates(reg)
    out = {}
    for j in jobs:
        res = resources_of(j)
        if int(res.get("gpus") or 0) and j.frontend == "vision":
            out[j.hash] = _one(j, data, rates)[2]
    return out


def estimate(path: str, jobs: list[Job], reg: Any) -> list[str]:
    """Lines for the dry run: the GPU-hours of each group of jobs with the same encoder and crop size, and the total;
    jobs without a measured rate (or without a data size) listed as not estimated."""
    data = data_of(path)
    rates = measured_rates(reg)
    known: dict[tuple[str, int], float] = {}
    unknown: dict[tuple[str, int], int] = {}
    per_job: list[str] = []
    for j in jobs:
        res = resources_of(j)
        gpus = int(res.get("gpus") or 0) * int(res.get("nodes") or 1)
        if not gpus or j.frontend != "vision":
            continue
        key, hours, text = _one(j, data, rates)
        if hours is not None:
            known[key] = known.get(key, 0.0) + hours
            per_job.append(f"GPU-hours: {text}  {j.label()}")
        else:
            unknown[key] = unknown.get(key, 0) + 1
    lines = [f"GPU-hours: {h:,.0f} for the {encoder} jobs at {size} (rate {rates[(encoder, size)]['rate']:,.0f} "
             f"images/s per GPU measured on {rates[(encoder, size)]['device']} at {rates[(encoder, size)]['code']})"
             for (encoder, size), h in sorted(known.items())]
    lines += [f"GPU-hours: not estimated for {n} {encoder} job(s) at {size}: "
              + (f"no step rate of {encoder} at {size} measured on a GPU in the registry (make gpu-all measures one: "
                 f"task {RATE_TASK})" if (encoder, size) not in rates else "no image count or not two views (see "
                 "--explain)") for (encoder, size), n in sorted(unknown.items())]
    lines += per_job
    if known:
        lines.append(f"GPU-hours: {sum(known.values()):,.0f} in all for the estimated jobs")
    return lines
