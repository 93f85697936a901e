"""Completion codes made with a random key of each study, not the server's SECRET_KEY
(issue 36, finding 7; docs/crowd.md). Every existing study gets its own key, and every crowd
entry made before this migration keeps the code it could have been shown (its MAC part, made
as before with the SECRET_KEY of the server that runs the migration), so codes handed out to
the workers of a running study stay valid; entries made after get the new codes."""
import secrets

from django.db import migrations, models
from django.utils.crypto import salted_hmac

import annotation.models

BATCH = 1000


def legacy_mac(study_id: int, platform: str, worker_id: str, session_id: str) -> str:
    """The MAC part of a completion code before this migration (selectors.worker_completion_code then)."""
    return salted_hmac("evalapp.completion-code",
                       f"{study_id}:{platform}:{worker_id}:{session_id}").hexdigest()[:10].upper()


def keep_issued_codes(apps, schema_editor):
    Study = apps.get_model("annotation", "Study")
    CrowdSession = apps.get_model("annotation", "CrowdSession")
    for study in Study.objects.only("pk").iterator():
        Study.objects.filter(pk=study.pk).update(completion_secret=secrets.token_hex(32))
    entries = CrowdSession.objects.select_related("annotator").order_by("pk")
    batch = []
    for entry in entries.iterator(chunk_size=BATCH):
        entry.legacy_code_mac = legacy_mac(entry.study_id, entry.annotator.platform, entry.annotator.external_id,
                                           entry.platform_session_id)
        batch.append(entry)
        if len(batch) == BATCH:
            CrowdSession.objects.bulk_update(batch, ["legacy_code_mac"])
            batch = []
    CrowdSession.objects.bulk_update(batch, ["legacy_code_mac"])


class Migration(migrations.Migration):

    dependencies = [
        ('annotation', '0022_settings_table'),
    ]

    operations = [
        migrations.AddField(
            model_name='crowdsession',
            name='legacy_code_mac',
            field=models.CharField(blank=True, default='', editable=False, max_length=16),
        ),
        # Added empty, then each existing study gets its own key, then new studies get one by default.
        migrations.AddField(
            model_name='study',
            name='completion_secret',
            field=models.CharField(default='', editable=False, max_length=64),
        ),
        migrations.RunPython(keep_issued_codes, migrations.RunPython.noop),
        migrations.AlterField(
            model_name='study',
            name='completion_secret',
            field=models.CharField(default=annotation.models.completion_secret_new, editable=False, max_length=64),
        ),
    ]
