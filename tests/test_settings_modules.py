"""Every settings module the README names loads and gives the app what it uses.

The suite itself runs on evalapp.settings.test; these start a fresh interpreter on dev and prod
so that a setting the tests override (caches, say) cannot be missing where the demo runs.
"""
import os
import subprocess
import sys

import pytest
from tests.builders.bundles import REPO


CHECK = """
import django
django.setup()
from django.core.cache import caches
from django.core.management import call_command
for alias in ("default", "shared"):
    caches[alias].get("evalapp-settings-check")
call_command("check")
print("ok")
"""


@pytest.mark.parametrize("module", ["evalapp.settings.dev", "evalapp.settings.prod"])
@pytest.mark.parametrize("cache_url", ["", "redis://127.0.0.1:6379/12"])
def test_settings_module_loads_with_every_cache_the_app_uses(module, cache_url, tmp_path):
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": module, "DJANGO_SECRET_KEY": "settings-check",
           "DJANGO_ALLOWED_HOSTS": "localhost", "EVALAPP_VAR_DIR": str(tmp_path), "EVALAPP_CACHE_URL": cache_url}
    env.pop("DATABASE_URL", None)
    done = subprocess.run([sys.executable, "-c", CHECK], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-2000:]


WARM = """
import evalapp.wsgi
from django.urls import get_resolver
from django.template import engines
from django.utils.translation import get_language
loader = engines["django"].engine.template_loaders[0]
print(get_language() in get_resolver()._reverse_dict,
      sorted(name for name in loader.get_template_cache if name.startswith("annotation/")))
"""


def test_the_wsgi_module_prepares_what_a_fresh_process_would_do_in_its_first_requests(tmp_path):
    # gunicorn --preload imports evalapp.wsgi before forking: whatever it builds, the workers share.
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "evalapp.settings.prod", "DJANGO_SECRET_KEY": "wsgi-check",
           "DJANGO_ALLOWED_HOSTS": "localhost", "EVALAPP_VAR_DIR": str(tmp_path)}
    env.pop("DATABASE_URL", None)
    done = subprocess.run([sys.executable, "-c", WARM], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    # The annotator's screens, and the researcher's (the pair page's compile was 120 ms of its first view).
    assert done.stdout.split("\n")[0] == ("True ['annotation/_hit.html', 'annotation/annotate.html', "
                                          "'annotation/dashboard.html', 'annotation/metrics_table.html', "
                                          "'annotation/pair_detail.html']"), done.stdout


def test_postgresql_connection_options_from_the_url_are_kept():
    """The connection options a DATABASE_URL gives (a search_path or a statement timeout set
    there) reach the connection as given: the settings add server-side binding and prepared
    statements beside them, and no plan mode (PostgreSQL's own, evalapp/settings/base.py)."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "evalapp.settings.dev",
           "DATABASE_URL": "postgres://u@127.0.0.1:5432/db?options=-c%20statement_timeout%3D60000"}
    done = subprocess.run([sys.executable, "-c", "from evalapp.settings import base; "
                                                 "print(base.DATABASES['default']['OPTIONS']['options'])"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["-c", "statement_timeout=60000"], \
        done.stderr[-2000:]


THREADS = """
import evalapp.wsgi
import numpy
numpy.linalg.solve(numpy.eye(300) + 1.0, numpy.ones(300))
with open("/proc/self/status") as status:
    print(next(line.split()[1] for line in status if line.startswith("Threads:")))
"""


def test_an_app_process_runs_numpy_on_one_thread(tmp_path):
    """OpenBLAS's threads spun after every call: the active design's fit cost 100x its CPU on a
    busy 2-core machine (evalapp/__init__.py). Fails on a process that loads numpy with a thread
    per core (on a machine of one core it cannot fail)."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "evalapp.settings.prod", "DJANGO_SECRET_KEY": "threads-check",
           "DJANGO_ALLOWED_HOSTS": "localhost", "EVALAPP_VAR_DIR": str(tmp_path)}
    for variable in ("DATABASE_URL", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
        env.pop(variable, None)
    done = subprocess.run([sys.executable, "-c", THREADS], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "1", f"{done.stdout.strip()} threads"
