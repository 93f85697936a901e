"""manage.py export_study SLUG PATH: write a study (with its judgements) as a bundle."""
from django.core.management.base import BaseCommand, CommandError

from annotation.models import Study
from annotation.selectors.exports import study_export


class Command(BaseCommand):
    help = "Export a study as a bundle; judgements become human_preference rows (.gz compresses)."

    def add_arguments(self, parser):
        parser.add_argument("slug")
        parser.add_argument("path")

    def handle(self, *args, slug, path, **options):
        try:
            study = Study.objects.get(slug=slug)
        except Study.DoesNotExist:
            raise CommandError(f"no study with slug {slug!r}") from None
        lines = study_export(study=study, path=path)
        self.stdout.write(self.style.SUCCESS(f"wrote {lines} lines to {path}"))
