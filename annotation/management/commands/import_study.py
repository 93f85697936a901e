"""manage.py import_study PATH [--slug S] [--metric NAME | --human-only]: import a study bundle."""
import sys
import time

from django.core.management.base import BaseCommand, CommandError

from annotation.reports import study_dashboard_refresh, study_metrics_table_refresh
from annotation.services import study_import
from protocol.bundle import BundleError


class Command(BaseCommand):
    help = "Import a study bundle (JSON Lines, plain or gzipped); all or nothing."

    def add_arguments(self, parser):
        parser.add_argument("path")
        parser.add_argument("--slug", help="URL name of the new study (default: from its name)")
        choice = parser.add_mutually_exclusive_group()
        choice.add_argument("--metric", help="the metric the protocol uses (default: the bundle's setting)")
        choice.add_argument("--human-only", action="store_true",
                            help="no metric: decide from human judgements only (needed when the bundle "
                                 "has metrics but names none)")
        parser.add_argument("--separability", choices=["inline", "background", "skip"], default="inline",
                            help="when outputs have >= 2 samples: score separability now (default), "
                                 "as a background task, or not at all")

    def handle(self, *args, path, slug=None, metric=None, human_only=False, separability="inline", **options):
        started = time.monotonic()
        stream = self.stderr
        verbose = options["verbosity"] > 0

        def progress(stage: str, done: int, total: int) -> None:
            if verbose:
                stream.write(f"\r  {stage:<20} {done:>7}/{total:<7}", ending="")
                if done >= total:
                    stream.write("")
                sys.stderr.flush()

        try:
            study = study_import(source=path, slug=slug, metric="" if human_only else metric,
                                 metric_required=True, separability=separability, progress=progress)
        except BundleError as exc:
            message = str(exc)
            if "names no metric for the protocol" in message:
                message += " (--metric NAME or --human-only)"
            raise CommandError(message) from None
        imported = time.monotonic() - started
        if study.protocol_started:
            # The dashboard's heavy parts for round 1, cached now, so its first view is a read.
            study_dashboard_refresh(study_id=study.pk)
        # So is the metrics table's first view: otherwise it starts the table's job in a web
        # server's background lane, whose seconds of CPU the crowd's first requests then share
        # (a worker's first HIT at 50 x 2,000 on PostgreSQL: 54-70 ms beside it, 39-45 ms without).
        study_metrics_table_refresh(study_id=study.pk)
        self.stdout.write(self.style.SUCCESS(
            f"imported study {study.slug!r} ({study.systems.count()} systems, {study.items.count()} items, "
            f"{study.pair_states.count()} pairs, {study.budget} judgements in the budget) in {imported:.1f} s, "
            f"dashboard and metrics table computed in "
            f"{time.monotonic() - started - imported:.1f} s"))
