"""manage.py serving_audit SLUG [--keys FILE]: serving's invariants, checked in the database.

Prints JSON (selectors.serving.study_serving_audit): duplicates, lost judgements (--keys: a file of
idempotency keys the server acknowledged, one per line), counters and protocol consistency.
The load harness runs it at the end of a run, with the server's database settings.
"""
import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from annotation.models import Study
from annotation.selectors.serving import study_serving_audit


class Command(BaseCommand):
    help = "Check serving's invariants of a study in the database and print them as JSON."

    def add_arguments(self, parser):
        parser.add_argument("slug")
        parser.add_argument("--keys", help="file with the idempotency keys of acknowledged submits")

    def handle(self, *args, slug, keys=None, **options):
        study = Study.objects.filter(slug=slug).first()
        if study is None:
            raise CommandError(f"no study with slug {slug!r}")
        acknowledged = Path(keys).read_text().split() if keys else None
        self.stdout.write(json.dumps(study_serving_audit(study=study, acknowledged_keys=acknowledged)))
