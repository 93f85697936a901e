"""WSGI entry point."""
import gc
import os

from django.core.wsgi import get_wsgi_application
from django.template.loader import get_template
from django.urls import get_resolver

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalapp.settings.prod")

application = get_wsgi_application()
# Import every view (and what they import) now, not in the first annotator's request: with
# gunicorn --preload this happens once, before the workers fork. So do the reverse lookup
# table (the first reverse() builds it) and the annotator's templates (the cached
# loader keeps them compiled): otherwise a crowd arriving at once finds every fresh process
# doing both in its first requests. The researcher's screens too: compiling the pair page was
# most of a process's first view of it (docs/benchmarks.md).
get_resolver().reverse_dict
for _name in ("annotation/annotate.html", "annotation/_hit.html", "annotation/dashboard.html",
              "annotation/pair_detail.html", "annotation/metrics_table.html"):
    get_template(_name)
# What the app loaded lives as long as the process: frozen, the collector's full passes skip it
# (and, before gunicorn forks, do not write the pages the workers share). evalapp/warmup.py
# freezes what each worker adds before it serves.
gc.freeze()
