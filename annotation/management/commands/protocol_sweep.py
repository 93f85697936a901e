"""manage.py protocol_sweep: close filled rounds left behind and reclaim expired leases.

The web process (no broker) and Celery beat (with one) run the same sweep periodically; this
command runs it once, e.g. from cron or after an outage.
"""
import json

from django.core.management.base import BaseCommand

from annotation.models import Study
from annotation.services.runtime import protocol_ensure_started, protocol_sweep


class Command(BaseCommand):
    help = "Close filled rounds left behind, reclaim expired leases, start protocols of older studies."

    def handle(self, *args, **options):
        started = sum(protocol_ensure_started(study=s) for s in Study.objects.all())
        self.stdout.write(json.dumps({**protocol_sweep(), "protocols_started": started}))
