"""The Celery app. Without CELERY_BROKER_URL tasks run eagerly in the calling process.

``celery -A evalapp worker -B`` runs beat (the periodic sweep) in a child process of the
worker. A worker killed with SIGKILL cannot stop it, and it ran on alone: sending the sweep
with no worker of its own, and beside the beat of the worker started again. So the beat child
asks the kernel to end it when its worker dies (docs/serving.md, "Faults"); the
pool's children already end when they lose their parent.
"""
import ctypes
import os
import signal
import sys

from celery import Celery
from celery.signals import beat_embedded_init, worker_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalapp.settings.dev")

app = Celery("evalapp")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
_worker_pid: int | None = None


@worker_init.connect
def _remember_the_worker(**kwargs) -> None:
    """In the worker's main process, before it starts beat: who beat's parent must be."""
    global _worker_pid
    _worker_pid = os.getpid()


@beat_embedded_init.connect
def _beat_ends_with_its_worker(**kwargs) -> None:
    """In the embedded beat's process (``worker -B``): SIGTERM when the worker dies."""
    die_with_parent(_worker_pid)


def die_with_parent(parent: int | None) -> None:
    """Have the kernel send this process SIGTERM when its parent dies (Linux's
    PR_SET_PDEATHSIG); if ``parent`` died already (this process was handed to another
    parent before the request took effect), end now. Elsewhere: nothing."""
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != (parent or os.getppid()) or os.getppid() == 1:
        os.kill(os.getpid(), signal.SIGTERM)
