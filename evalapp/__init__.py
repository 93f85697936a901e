import os

# numpy's OpenBLAS starts a thread per core at import and spins them waiting for work after
# every call. In the app's processes (web workers, Celery, the reports' child), which run side
# by side on few cores, the spinning cost far more than it bought: the active design's fit at
# 200 systems, 16.4 ms of CPU on one thread, took 602-1,085 ms with a thread per core on a busy
# 2-core machine (scripts/bench/active_fit.py, docs/benchmarks.md). Set before numpy is
# imported: every process of the app imports this package first (its settings, its WSGI
# module, ``-A evalapp``); a deployment that sets the variable keeps its own.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from .celery import app as celery_app  # noqa: E402 (after the BLAS threads are set)

__all__ = ("celery_app",)
