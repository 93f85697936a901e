"""manage.py import_study PATH [PATH ...] [--slug S] [--metric NAME | --human-only] [--columns MAP]
[--compute LIST] [--owner USER]: import a study bundle, or the files a researcher has (tables,
AlpacaEval outputs, MT-Bench answer files with their questions, a saved Hugging Face dataset:
protocol/tables.py)."""
import sys
import time
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from annotation.reports import study_metrics_table_refresh
from annotation.services.studies import study_import
from protocol import tables
from protocol.bundle import BundleError
from protocol.computed_metrics import COMPUTABLE, parse_compute


class Command(BaseCommand):
    help = ("Import a study bundle (JSON Lines, plain or gzipped), or tables / tools' output files as a study "
            "(docs/bundle-format.md, 'Files as you have them'); all or nothing.")

    def add_arguments(self, parser):
        parser.add_argument("paths", nargs="+", metavar="path",
                            help="a bundle; or tables (CSV, TSV, JSON Lines, JSON, Parquet, a saved dataset "
                                 "folder), AlpacaEval outputs (one file per model), MT-Bench question + answer files")
        parser.add_argument("--columns", help="which column plays which role when the names do not say it: "
                                              "prompt=question,model=generator,response=answer,id=...,"
                                              "reference=...,metrics=a+b,ignore=c")
        parser.add_argument("--compute", help=f"metrics to compute at import: {', '.join(COMPUTABLE)} "
                                              "(chrf, bleu and rouge_l against the reference column)")
        parser.add_argument("--name", help="the study's name (tables; default: the first file's name)")
        parser.add_argument("--text-format", choices=["plain", "markdown"],
                            help="how texts are shown (tables; default: markdown when the answers look like it)")
        parser.add_argument("--owner", help="a user (username or e-mail) who becomes the study's researcher")
        parser.add_argument("--slug", help="URL name of the new study (default: from its name)")
        choice = parser.add_mutually_exclusive_group()
        choice.add_argument("--metric", help="the metric the protocol uses (default: the bundle's setting)")
        choice.add_argument("--human-only", action="store_true",
                            help="no metric: decide from human judgements only (needed when the bundle "
                                 "has metrics but names none)")
        parser.add_argument("--separability", choices=["inline", "background", "skip"], default="inline",
                            help="when outputs have >= 2 samples: score separability now (default), "
                                 "as a background task, or not at all")

    def handle(self, *args, paths, slug=None, metric=None, human_only=False, separability="inline", columns=None,
               compute=None, name=None, text_format=None, owner=None, **options):
        started = time.monotonic()
        owner_user = None
        if owner:
            users = get_user_model().objects
            owner_user = users.filter(username=owner).first() or users.filter(email__iexact=owner).first()
            if owner_user is None:
                raise CommandError(f"no user {owner!r} (give a username or an e-mail address)")
        try:
            mapping = tables.parse_columns(columns) if columns else None
            computed = parse_compute(compute or "")
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        stream = self.stderr
        verbose = options["verbosity"] > 0

        def progress(stage: str, done: int, total: int) -> None:
            if verbose:
                stream.write(f"\r  {stage:<20} {done:>7}/{total:<7}", ending="")
                if done >= total:
                    stream.write("")
                sys.stderr.flush()

        try:
            files = [(Path(p).name, p) for p in paths]
            if len(files) > 1 or mapping or computed or not tables.is_bundle(paths[0]):
                records = tables.read_files(files)
                if records[0].kind != tables.BUNDLE and verbose:
                    stream.write(f"reading {tables.sniff(records, mapping).describe()}")
            source = tables.import_source(files, columns=mapping, name=name, text_format=text_format,
                                          compute=computed)
            study = study_import(source=source, slug=slug, metric="" if human_only else metric,
                                 metric_required=True, separability=separability, progress=progress,
                                 created_by=owner_user)
        except BundleError as exc:
            message = str(exc)
            if "names no metric for the protocol" in message:
                message += " (--metric NAME or --human-only)"
            raise CommandError(message) from None
        imported = time.monotonic() - started
        # The metrics table's first view is a read (about a second at 200 systems): otherwise it
        # starts the table's job in a web server's background lane, whose CPU the crowd's first
        # requests then share (docs/benchmarks.md, "A leaderboard-sized study"). The dashboard is
        # left to the report job its first view starts (reports.study_dashboard_ready; the page
        # says it is computing): at 200 systems it was 13 of the command's 30 s of CPU and its
        # peak memory (docs/benchmarks.md, "Import").
        study_metrics_table_refresh(study_id=study.pk)
        pairs = study.pair_states.count()
        self.stdout.write(self.style.SUCCESS(
            f"imported study {study.slug!r} ({study.systems.count()} systems, {study.items.count()} items, "
            f"{pairs} pair{'s' if pairs != 1 else ''}, "
            f"{study.budget} judgements in the budget) in {imported:.1f} s, "
            f"metrics table computed in {time.monotonic() - started - imported:.1f} s "
            f"(the dashboard is computed on its first view)"))
