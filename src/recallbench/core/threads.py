"""Thread settings for the system under test: how many BLAS / OpenMP threads a worker's
native libraries use (`--threads`, default 1 per worker).

A worker (a process, or this process for in-process runs) runs one task at a time, and
several workers run at once: a store whose encoder or linear algebra starts a thread per
core in every worker oversubscribes the machine (what one store measured: docs/executors.md),
and thread counts can change floating-point sums. `limit_threads(n)` sets, for the duration:

* the environment variables the native libraries read when they start (`THREAD_VARIABLES`:
  OpenMP, OpenBLAS, MKL, BLIS, Accelerate, numexpr), for libraries loaded later and for
  programs the store starts;
* the pools of libraries already loaded, through threadpoolctl (BLAS and OpenMP);
* torch's intra-op threads, when torch is already imported (never imported here).

`n` None leaves every library its default. What was set is restored on exit.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

#: the variables native thread pools read at start-up
THREAD_VARIABLES = (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "BLIS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)
#: the default: one thread per worker (`--threads`, `tasks.Execution.threads`)
DEFAULT_THREADS = 1


@contextlib.contextmanager
def limit_threads(threads: int | None) -> Iterator[None]:
    """BLAS / OpenMP / torch threads limited to `threads` inside the block (None: as they
    are), restored after it."""
    if threads is None:
        yield
        return
    saved = {name: os.environ.get(name) for name in THREAD_VARIABLES}
    for name in THREAD_VARIABLES:
        os.environ[name] = str(threads)
    torch = sys.modules.get("torch")
    torch_before = torch.get_num_threads() if torch is not None else None
    limits = None
    try:
        if torch is not None:
            torch.set_num_threads(threads)
        try:
            from threadpoolctl import threadpool_limits
        except ImportError:  # the environment variables still reach libraries loaded later
            pass
        else:
            limits = threadpool_limits(limits=threads)
        yield
    finally:
        if limits is not None:
            limits.restore_original_limits()
        if torch is not None and torch_before is not None:
            torch.set_num_threads(torch_before)
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
