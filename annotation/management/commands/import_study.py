"""manage.py import_study PATH [--slug S] [--metric NAME]: import a study bundle."""
import sys
import time

from django.core.management.base import BaseCommand, CommandError

from annotation.services import study_import
from protocol.bundle import BundleError


class Command(BaseCommand):
    help = "Import a study bundle (JSON Lines, plain or gzipped); all or nothing."

    def add_arguments(self, parser):
        parser.add_argument("path")
        parser.add_argument("--slug", help="URL name of the new study (default: from its name)")
        parser.add_argument("--metric", help="the metric the protocol uses (default: the bundle's setting)")
        parser.add_argument("--separability", choices=["inline", "background", "skip"], default="inline",
                            help="when outputs have >= 2 samples: score separability now (default), "
                                 "as a background task, or not at all")

    def handle(self, *args, path, slug=None, metric=None, separability="inline", **options):
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
            study = study_import(source=path, slug=slug, metric=metric, separability=separability,
                                 progress=progress)
        except BundleError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(self.style.SUCCESS(
            f"imported study {study.slug!r} ({study.systems.count()} systems, {study.items.count()} items, "
            f"{study.comparisons.count()} comparisons) in {time.monotonic() - started:.1f} s"))
