"""Clients of the cockpit, the admin and the API (researchers, staff), and the forms they post."""
from __future__ import annotations

import gzip
import io

from django.contrib.auth.models import Group, User
from django.test import Client
from rest_framework.test import APIClient

from annotation.access import RESEARCHER_GROUP
from annotation.services.members import study_membership_set
from tests.builders.bundles import bundle_bytes


def researcher_client(client, study, role="researcher"):
    user = User.objects.create_user(f"{role}-{study.slug}", password="pw-12345678")
    study_membership_set(study=study, user=user, role=role)
    client.force_login(user)
    return client


def api_for(username, researcher=False):
    user = User.objects.create_user(username, password="pw-12345678")
    if researcher:
        user.groups.add(Group.objects.get_or_create(name=RESEARCHER_GROUP)[0])
    client = APIClient()
    client.force_authenticate(user)
    return client, user


def api_upload(client, rows, **extra):
    f = io.BytesIO(gzip.compress(bundle_bytes(rows)))
    f.name = "bundle.jsonl.gz"
    return client.post("/api/studies/", {"bundle": f, **extra}, format="multipart")


def group_researcher_client(username="rita"):
    user = User.objects.create_user(username, email=f"{username}@example.org", password=f"pw-{username}-123")
    user.groups.add(Group.objects.get_or_create(name=RESEARCHER_GROUP)[0])
    client = Client()
    client.force_login(user)
    return user, client


def admin_client():
    admin = User.objects.create_user("boss", password="pw-boss-123", is_staff=True, is_superuser=True)
    client = Client()
    client.force_login(admin)
    return client


def admin_form_data(client, study):
    """The admin change form's current values as POST data (inlines included)."""
    page = client.get(f"/admin/annotation/study/{study.pk}/change/")
    forms = [page.context["adminform"].form]
    data = {}
    for formset in page.context["inline_admin_formsets"]:
        management = formset.formset.management_form
        for name in management.fields:
            data[f"{management.prefix}-{name}"] = management[name].value()
        forms += formset.formset.forms
    for form in forms:
        for name in form.fields:
            value = form[name].value()
            if value is not None and value is not False:
                data[form.add_prefix(name)] = value
    return page, data


def planner_form_data(**changes):
    data = {"budgets": "all", "batches": "5", "gammas": "0.05", "throughput": "30", "policy": "paper", "reps": "1",
            "metric_error": "0.3", "metric_error_low": "0.2", "metric_error_high": "0.4",
            "tie_rate": "0.2", "tie_rate_low": "0.1", "tie_rate_high": "0.3",
            "spread": "0.8", "spread_low": "0.5", "spread_high": "1.2"}
    data.update(changes)
    return {k: v for k, v in data.items() if v is not None}
