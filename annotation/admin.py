from django.contrib import admin
from django.core.exceptions import ValidationError
from django.forms.models import BaseInlineFormSet

from protocol.study_settings import ADMIN, SETTINGS

from . import models
from .services.studies import item_withdraw


class SystemInline(admin.TabularInline):
    model = models.System
    extra = 0


class MembershipFormSet(BaseInlineFormSet):
    """The admin keeps the members page's rule: a study with a researcher keeps one."""

    def clean(self):
        super().clean()
        had_researcher = self.instance.pk is not None and models.StudyMembership.objects.filter(
            study=self.instance, role=models.StudyMembership.Role.RESEARCHER).exists()
        kept = [form.cleaned_data for form in self.forms
                if form.cleaned_data and not form.cleaned_data.get("DELETE")]
        if had_researcher and not any(data.get("role") == models.StudyMembership.Role.RESEARCHER
                                      for data in kept):
            raise ValidationError("a study keeps at least one researcher: add another before "
                                  "removing or demoting the last")


class MembershipInline(admin.TabularInline):
    model = models.StudyMembership
    formset = MembershipFormSet
    extra = 0
    autocomplete_fields = ["user"]


@admin.register(models.Study)
class StudyAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "criterion", "status", "allocation_policy", "protocol_rule", "guarantee",
                    "budget", "metric"]
    list_filter = ["status", "allocation_policy", "protocol_rule"]
    search_fields = ["name", "slug"]
    inlines = [MembershipInline, SystemInline]
    # Protocol state, written only by the services.
    STATE_FIELDS = ("protocol_closes", "protocol_imported_judgements", "separability_status", "separability_done",
                    "separability_total", "separability_error", "protocol_lost_judgements",
                    "protocol_redecide_requested", "protocol_redecide_done", "exclusions_active")

    # Study settings the admin may not set (the table of study settings, protocol/study_settings.py).
    NOT_HERE = tuple(name for name, setting in SETTINGS.items() if ADMIN not in setting.surfaces)

    def get_readonly_fields(self, request, obj=None):
        """Once the protocol has started its parameters are fixed (Study.clean refuses a change
        too), and the budget is changed on the study's settings page, which checks it against
        what is spent and opens the rounds a raise allows."""
        fields = [*self.STATE_FIELDS, *self.NOT_HERE]
        if obj is not None and obj.protocol_started:
            fields += [*models.Study.PROTOCOL_PARAMETERS, "budget"]
        return fields

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "metric":
            # Offer only this study's metrics (Study.clean refuses any other).
            study_id = request.resolver_match.kwargs.get("object_id")
            kwargs["queryset"] = models.Metric.objects.filter(study_id=study_id) if study_id else \
                models.Metric.objects.none()
        return super().formfield_for_foreignkey(db_field, request, **kwargs)


class ReadOnlyAdmin(admin.ModelAdmin):
    """A list to look things up in: these rows change only through the services (members page,
    quality panel, API), which keep their rules (a study's last researcher; a re-decision)."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(models.StudyMembership)
class StudyMembershipAdmin(ReadOnlyAdmin):
    """Memberships change on the members page or in the study's inline."""
    list_display = ["study", "user", "role"]
    list_filter = ["role", "study"]


@admin.register(models.System)
class SystemAdmin(admin.ModelAdmin):
    list_display = ["name", "study"]
    list_filter = ["study"]


@admin.action(description="Withdraw the items (never served again)")
def withdraw_items(modeladmin, request, queryset):
    items = queryset if queryset.model is models.Item else models.Item.objects.filter(
        pk__in=queryset.values_list("item_id", flat=True))
    for item in items:
        item_withdraw(item=item)
    modeladmin.message_user(request, f"{items.count()} item(s) withdrawn.")


@admin.register(models.Item)
class ItemAdmin(admin.ModelAdmin):
    list_display = ["external_id", "study", "position", "withdrawn"]
    list_filter = ["study", "withdrawn"]
    search_fields = ["external_id"]
    actions = [withdraw_items]


@admin.register(models.ItemFlag)
class ItemFlagAdmin(admin.ModelAdmin):
    """Annotators' reports of broken items; withdraw an item with the action."""

    list_display = ["item", "reason", "note", "annotator", "created_at", "item_withdrawn"]
    list_filter = ["reason", "item__study"]
    list_select_related = ["item", "annotator"]
    raw_id_fields = ["item", "assignment", "annotator"]
    actions = [withdraw_items]

    @admin.display(boolean=True, description="withdrawn")
    def item_withdrawn(self, flag):
        return flag.item.withdrawn


@admin.register(models.Output)
class OutputAdmin(admin.ModelAdmin):
    list_display = ["item", "system", "sample"]
    list_select_related = ["item", "system"]
    raw_id_fields = ["item", "system"]


@admin.register(models.Metric)
class MetricAdmin(admin.ModelAdmin):
    list_display = ["name", "study", "kind", "tie_margin"]
    list_filter = ["study", "kind"]

    def get_readonly_fields(self, request, obj=None):
        # A metric's scores belong to its study's outputs: it cannot move to another study.
        # Its tie margin makes the labels the protocol computes from the scores
        # (serving/metric_labels.py): fixed once the study's protocol has started.
        if obj is None:
            return []
        return ["study", "kind", "tie_margin"] if obj.study.protocol_started else ["study", "kind"]


@admin.register(models.MetricScore)
class MetricScoreAdmin(admin.ModelAdmin):
    list_display = ["metric", "output", "value"]
    raw_id_fields = ["output"]


@admin.register(models.MetricPreference)
class MetricPreferenceAdmin(admin.ModelAdmin):
    list_display = ["metric", "item", "first", "second", "value"]
    raw_id_fields = ["item", "first", "second"]


@admin.register(models.HumanScore)
class HumanScoreAdmin(admin.ModelAdmin):
    list_display = ["output", "annotator_label", "value"]
    raw_id_fields = ["output"]


@admin.register(models.Comparison)
class ComparisonAdmin(admin.ModelAdmin):
    list_display = ["item", "first", "second", "separability"]
    list_filter = ["study"]
    raw_id_fields = ["item", "first", "second"]


@admin.register(models.Annotator)
class AnnotatorAdmin(admin.ModelAdmin):
    list_display = ["external_id", "platform", "user", "created_at"]
    list_filter = ["platform"]
    search_fields = ["external_id"]


@admin.register(models.Assignment)
class AssignmentAdmin(admin.ModelAdmin):
    list_display = ["annotator", "comparison", "state", "issued_at", "expires_at"]
    list_filter = ["state"]
    raw_id_fields = ["annotator", "comparison"]


@admin.register(models.Judgement)
class JudgementAdmin(admin.ModelAdmin):
    list_display = ["comparison", "annotator", "value", "source", "created_at"]
    list_filter = ["source"]
    raw_id_fields = ["comparison", "annotator", "assignment"]


class PairStateHistoryInline(admin.TabularInline):
    model = models.PairStateHistory
    extra = 0
    readonly_fields = ["round", "decision", "theta", "theta_se", "counts", "judgements", "created_at"]


@admin.register(models.PairState)
class PairStateAdmin(admin.ModelAdmin):
    list_display = ["study", "first", "second", "status", "decision", "theta", "round"]
    list_filter = ["study", "status"]
    inlines = [PairStateHistoryInline]
    # Protocol state is written only by serving/protocol_state.py (one codec, validated).
    readonly_fields = ["study", "first", "second", "status", "decision", "theta", "theta_se", "round", "quota_left",
                       "leased", "version", "state", "criteria_state", "updated_at", "hits", "log_e_value", "cv_n",
                       "cv_s", "cv_m", "cv_ss", "cv_mm", "cv_sm", "level_k", "level_xx", "level_xm", "level_mm",
                       "level_v", "lanes_close", "calibration"]


@admin.register(models.CrowdSession)
class CrowdSessionAdmin(admin.ModelAdmin):
    list_display = ["annotator", "study", "platform_session_id", "created_at"]
    list_filter = ["study"]
    search_fields = ["annotator__external_id", "platform_session_id"]
    raw_id_fields = ["annotator"]


@admin.register(models.CheckItem)
class CheckItemAdmin(admin.ModelAdmin):
    list_display = ["external_id", "study", "expected"]
    list_filter = ["study", "expected"]
    search_fields = ["external_id", "input"]


@admin.register(models.AnnotatorExclusion)
class AnnotatorExclusionAdmin(ReadOnlyAdmin):
    list_display = ["annotator", "study", "excluded", "reason", "updated_at"]
    list_filter = ["study", "excluded"]


@admin.register(models.ExclusionEvent)
class ExclusionEventAdmin(ReadOnlyAdmin):
    list_display = ["created_at", "study", "annotator", "action", "user", "rule", "reason", "judgements"]
    list_filter = ["study", "action"]
