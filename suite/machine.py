"""What a speed figure was measured on (issue 68): the device's name, the NVIDIA driver, CUDA, torch and Triton
versions and a machine identity that tells two machines apart, recorded with every GPU row (``make gpu-check``,
``make gpu-bench``, the fused kernels' bench).

Every host of the lent GPU machines is called ``vm``, so the host name says nothing; the identity is a digest of the
GPUs' UUIDs (one per physical GPU), the host's ``/etc/machine-id`` and its host name. A value that cannot be read
here (no GPU, no ``nvidia-smi``, no Triton) is None, never a guess.

Example: >>> environment(torch.device("cpu"))["gpu"] is None
True
"""
from __future__ import annotations

import hashlib
import socket
import subprocess
from pathlib import Path
from typing import Any

import torch

FIELDS = ("device", "gpu", "gpu_uuid", "driver", "cuda", "torch", "triton", "machine")


def _triton() -> str | None:
    try:
        import triton
    except ImportError:
        return None
    return str(triton.__version__)


def _driver() -> str | None:
    """The NVIDIA driver's version (``nvidia-smi``; torch knows only the CUDA API version the driver offers)."""
    try:
        res = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = res.stdout.split()
    return lines[0] if res.returncode == 0 and lines else None


def _machine_id() -> str:
    try:
        return Path("/etc/machine-id").read_text().strip()
    except OSError:
        return ""


def machine_identity(gpu_uuids: list[str]) -> str:
    """A 12-hex digest of the GPUs' UUIDs, ``/etc/machine-id`` and the host name: two machines differ in it even when
    both are called ``vm`` (a cloned image shares its machine-id, never its GPUs)."""
    text = "\n".join([*sorted(gpu_uuids), _machine_id(), socket.gethostname()])
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def environment(device: torch.device) -> dict[str, Any]:
    """The :data:`FIELDS` of ``device`` (a CUDA device: its name and UUID, the driver; the CPU: those None)."""
    cuda = device.type == "cuda"
    uuids = [str(torch.cuda.get_device_properties(i).uuid) for i in range(torch.cuda.device_count())] if cuda else []
    gpu = torch.cuda.get_device_name(device) if cuda else None
    return {"device": gpu or "cpu", "gpu": gpu, "gpu_uuid": str(torch.cuda.get_device_properties(device).uuid)
            if cuda else None, "driver": _driver() if cuda else None, "cuda": torch.version.cuda,
            "torch": torch.__version__, "triton": _triton(), "machine": machine_identity(uuids)}
