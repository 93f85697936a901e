"""gunicorn's hooks for evalapp (``gunicorn evalapp.wsgi -c python:evalapp.gunicorn_conf ...``).

The command line keeps the server's sizes (scripts/demo.sh, scripts/bench/lib.sh); this file
holds what a flag cannot: a warm-up of each worker before it serves (``evalapp.warmup``), and
stopping the child process of its background "reports" lane when it exits (annotation/jobs.py).
"""
from __future__ import annotations


def post_worker_init(worker) -> None:
    """Runs in each worker after it is forked and before it accepts a request."""
    from evalapp.warmup import warm_worker  # the app is loaded by now (--preload): no settings yet at import

    # gthread workers hold their request threads in ``tpool`` (made before this hook runs)
    warm_worker(worker.wsgi, executor=getattr(worker, "tpool", None), threads=worker.cfg.threads)


def worker_exit(server, worker) -> None:
    """Runs in a worker that is exiting (a restart, the server's stop)."""
    from annotation import jobs  # the app is loaded by now (--preload): no settings yet at import

    jobs.processes_stop()
