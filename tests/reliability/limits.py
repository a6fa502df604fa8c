"""A disk that fills: ``file_size_limit(n)`` makes every write that would take a file past ``n`` bytes fail
(``RLIMIT_FSIZE``: the write returns EFBIG, "File too large", as ENOSPC would on a full disk; Python ignores the
SIGXFSZ signal), whatever function does the writing. The limit is this process's soft limit, restored after."""
from __future__ import annotations

import resource
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def file_size_limit(nbytes: int) -> Iterator[None]:
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (nbytes, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
