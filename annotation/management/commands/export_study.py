"""manage.py export_study SLUG PATH [--format bundle|trl|trl-conversational|kto]: write a study
(with its judgements) as a bundle, or its judgements as training-ready preference data."""
from django.core.management.base import BaseCommand, CommandError

from annotation.models import Study
from annotation.selectors.exports import study_export, study_training_export
from protocol.preference_data import FORMATS


class Command(BaseCommand):
    help = ("Export a study as a bundle (judgements become human_preference rows; .gz compresses), or with "
            "--format its judgements as TRL preference data (.jsonl, .jsonl.gz, .parquet, or a folder for a "
            "datasets directory) with a dataset card.")

    def add_arguments(self, parser):
        parser.add_argument("slug")
        parser.add_argument("path")
        parser.add_argument("--format", choices=("bundle", *FORMATS), default="bundle",
                            help="trl: prompt/chosen/rejected; trl-conversational: the same as messages; "
                                 "kto: prompt/completion/label")
        parser.add_argument("--min-agreement", type=float, default=0.0,
                            help="leave out comparisons whose majority has a smaller share of the votes")

    def handle(self, *args, slug, path, format="bundle", min_agreement=0.0, **options):
        try:
            study = Study.objects.get(slug=slug)
        except Study.DoesNotExist:
            raise CommandError(f"no study with slug {slug!r}") from None
        if format == "bundle":
            lines = study_export(study=study, path=path)
            self.stdout.write(self.style.SUCCESS(f"wrote {lines} lines to {path}"))
            return
        try:
            summary = study_training_export(study=study, path=path, form=format, min_agreement=min_agreement)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(self.style.SUCCESS(
            f"wrote {summary['rows']} {format} rows to {path} from {summary['comparisons']} judged comparisons "
            f"({summary['left_out_ties']} ties or even splits and {summary['left_out_below_agreement']} below "
            f"the agreement left out); dataset card {summary['card']}"))
