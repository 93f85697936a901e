"""The data model (docs/architecture.md). Models hold data and database constraints only; every write
goes through annotation/services/ and every non-trivial read through annotation/selectors/.

Canonical pair order: a pair's ``first`` system has the smaller name. Judgement and
preference values are stored in that order (+1 = first better); the order an annotator saw
is kept on the Assignment and undone when a judgement is saved.
"""
from __future__ import annotations

import secrets

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import models
from django.db.models import F, Q
from django.utils.deconstruct import deconstructible

from protocol.bundle import CHECK_EXPECTED, MAX_PROMPT_KIND, parse_criteria
from protocol.active_ranking import ActiveSettings
from protocol.designs import DESIGNS, PairDesign, design_of
from protocol.study_settings import CHOICE, FIXED, METRIC, SETTINGS, TEXT, cross_problems, metric_names

from . import guarantees

PREFERENCE_VALUES = Q(value__in=(-1, 0, 1))

# Lowest temperature of separability-weighted item choice and its reason (the study settings'
# table, protocol/study_settings.py, which takes them from protocol.allocation).
MIN_ITEM_CHOICE_TEMPERATURE = SETTINGS["item_choice_temperature"].minimum
TEMPERATURE_REASON = SETTINGS["item_choice_temperature"].reason


@deconstructible
class SettingBounds:
    """A study setting's bounds as declared in protocol/study_settings.py: the one check the
    model, the forms and the API serializers run; its message names the setting and its bounds."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, value) -> None:
        problem = SETTINGS[self.name].problem(value)
        if problem:
            raise ValidationError(problem, code="bounds")

    def __eq__(self, other) -> bool:
        return isinstance(other, SettingBounds) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)


class LiveRefusal(str):
    """The refusal of a value of a setting with live choices (the pair designs): the choices are
    named when the message is formatted (Django formats it with ``% {"value": ...}``), while the
    text a migration holds names none, so registering a new choice needs no migration."""

    def __new__(cls, name: str) -> LiveRefusal:
        refusal = super().__new__(cls, f"{name} must be one of its registered choices, got %(value)r")
        refusal.setting_name = name
        return refusal

    def __mod__(self, params: dict) -> str:
        return SETTINGS[self.setting_name].refusal(repr(params["value"]))


def declared(name: str, *, bounds: bool = True, **field) -> dict:
    """A Study field's keyword arguments from the study setting ``name``: its label (the field's
    verbose name), default, help, choices and bounds (a validator); ``field`` adds the rest."""
    setting = SETTINGS[name]
    kwargs = {"verbose_name": setting.label, "default": setting.default, "help_text": setting.explained, **field}
    if bounds:
        kwargs["validators"] = [SettingBounds(name)]
    if setting.kind == CHOICE:
        kwargs["choices"] = setting.field_choices
        refusal = setting.refusal("%(value)r") if isinstance(setting.choices, tuple) else LiveRefusal(name)
        kwargs["error_messages"] = {"invalid_choice": refusal}
    if setting.kind == TEXT:
        kwargs["blank"] = setting.blank
    if setting.default in ("", None):
        del kwargs["default"]  # the field's own empty default (and no table rebuild on SQLite)
    return kwargs


def choices_of(name: str, *extra: tuple[str, str]) -> list:
    """The members of a TextChoices class for the choices of the study setting ``name``
    (each named by its value in capitals), after ``extra`` (value, label) pairs."""
    return [(value.upper(), (value, label)) for value, label in (*extra, *SETTINGS[name].choices)]


def completion_secret_new() -> str:
    """A study's own random key for its workers' completion codes (256 bits)."""
    return secrets.token_hex(32)


class Study(models.Model):
    # Choices are declared once, with their setting (protocol/study_settings.py); a draft is a
    # status of its own, not one a researcher sets.
    Status = models.TextChoices("Status", choices_of("status", ("draft", "Draft")))
    Allocation = models.TextChoices("Allocation", choices_of("allocation_policy"))
    Rule = models.TextChoices("Rule", choices_of("protocol_rule"))
    FamilyControl = models.TextChoices("FamilyControl", choices_of("family_control"))
    ItemChoice = models.TextChoices("ItemChoice", choices_of("item_choice"))

    slug = models.SlugField(max_length=80, unique=True)
    name = models.CharField(max_length=200)
    criterion = models.CharField(max_length=100, blank=True)
    # A rubric: several criteria answered in one HIT, each decided by its own protocol lane
    # (protocol.rubric); [] = the one criterion above. Validated by protocol.bundle.parse_criteria.
    criteria = models.JSONField(default=list, blank=True)
    # Every study setting's field takes its label, default, help, choices and bounds from the
    # table of study settings (``declared``); tests/test_study_settings.py holds the two together.
    instructions = models.TextField(**declared("instructions"))
    text_format = models.CharField(max_length=10, **declared("text_format"))
    status = models.CharField(max_length=10, choices=Status.choices, default=SETTINGS["status"].default,
                              error_messages={"invalid_choice": SETTINGS["status"].refusal("%(value)r")})
    gamma = models.FloatField(**declared("gamma"))
    batch_size = models.PositiveIntegerField(**declared("batch_size"))
    budget = models.PositiveIntegerField(**declared("budget"))
    ratings_per_item = models.PositiveIntegerField(**declared("ratings_per_item"))
    # A new study controls its false ± decisions (issue 19): the adaptive policy with the
    # e-process rule. Studies made before keep the paper's policy and rule (migration 0012).
    allocation_policy = models.CharField(max_length=10, **declared("allocation_policy"))
    futility = models.FloatField(**declared("futility"))
    futility_prior = models.BooleanField(**declared("futility_prior"))
    protocol_rule = models.CharField(max_length=10, **declared("protocol_rule"))
    family_control = models.CharField(max_length=10, **declared("family_control"))
    # Which pairs the protocol spends on (docs/ranking.md): all of them, or those a merge sort
    # over the systems asks for, each decided at γ / C(k) so that the whole ranking is wrong
    # with probability ≤ γ. ``ranking_order`` is the sort's initial order, fixed at the start.
    pair_design = models.CharField(max_length=10, **declared("pair_design"))
    ranking_max_labels = models.PositiveIntegerField(**declared("ranking_max_labels"))
    ranking_order = models.JSONField(default=list, blank=True, editable=False,
                                     help_text="the ranking design's initial order (system names)")
    # The active design (docs/ranking.md, protocol.active_ranking) stops when every pair of
    # neighbours of the fitted order is resolved to this resolution (a difference of
    # Bradley–Terry log-strengths) at this posterior confidence.
    ranking_confidence = models.FloatField(**declared("ranking_confidence"))
    ranking_resolution = models.FloatField(**declared("ranking_resolution"))
    item_choice = models.CharField(max_length=10, **declared("item_choice"))
    item_choice_temperature = models.FloatField(**declared("item_choice_temperature"))
    separability_similarity = models.CharField(max_length=40, **declared("separability_similarity"))
    shown_sample = models.PositiveIntegerField(**declared("shown_sample"))
    metric = models.ForeignKey("Metric", null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
                               **declared("metric", bounds=False))
    combined_metrics = models.CharField(max_length=SETTINGS["combined_metrics"].max_length,
                                        **declared("combined_metrics"))
    lease_timeout_seconds = models.PositiveIntegerField(**declared("lease_timeout_seconds"))
    completion_code = models.CharField(max_length=SETTINGS["completion_code"].max_length, **declared("completion_code"))
    # Prolific's STUDY_ID of this study: when set, a start link naming another one is refused.
    prolific_study_id = models.CharField(max_length=SETTINGS["prolific_study_id"].max_length,
                                         **declared("prolific_study_id"))
    # A crowd worker's session is their work in this study (an Annotator is one platform
    # worker id); the completion-code rule is selectors.serving.crowd_session's docstring.
    session_hits_min = models.PositiveIntegerField(**declared("session_hits_min"))
    session_hits_max = models.PositiveIntegerField(**declared("session_hits_max"))
    session_minutes = models.PositiveIntegerField(**declared("session_minutes"))
    min_seconds_per_hit = models.PositiveIntegerField(**declared("min_seconds_per_hit"))
    # Quality control (docs/quality.md). A rule excludes a worker that protocol.quality flags
    # with its flag; exclusion re-decides the affected pairs (services/quality.py).
    check_every = models.PositiveIntegerField(**declared("check_every"))
    repeat_every = models.PositiveIntegerField(**declared("repeat_every"))
    onboarding_checks = models.PositiveIntegerField(**declared("onboarding_checks"))
    exclude_too_fast = models.BooleanField(**declared("exclude_too_fast"))
    exclude_failed_checks = models.BooleanField(**declared("exclude_failed_checks"))
    exclude_low_agreement = models.BooleanField(**declared("exclude_low_agreement"))
    protocol_lost_judgements = models.PositiveIntegerField(
        default=0, help_text="judgements of excluded workers (protocol state): spent, but no longer counted")
    # An exclusion or re-inclusion bumps ``requested``; the re-decision that brings the protocol
    # in line with the counted judgements sets ``done`` to the value it started from.
    protocol_redecide_requested = models.PositiveIntegerField(default=0)
    protocol_redecide_done = models.PositiveIntegerField(default=0)
    exclusions_active = models.PositiveIntegerField(
        default=0, help_text="workers excluded now (serving asks who only when this is not 0)")
    protocol_seed = models.PositiveIntegerField(**declared("protocol_seed"))
    protocol_strict = models.BooleanField(**declared("protocol_strict"))
    protocol_closes = models.PositiveIntegerField(default=0, help_text="rounds closed so far (protocol state)")
    # One closer of the study's rounds at a time, across processes (services/runtime.py): the
    # closer holds the study until this time; a close asked for meanwhile sets ``close_again``
    # and the closer closes once more before it lets go.
    protocol_closer_until = models.DateTimeField(null=True, blank=True, editable=False)
    protocol_close_again = models.BooleanField(default=False, editable=False)
    protocol_imported_judgements = models.PositiveIntegerField(
        default=0, help_text="judgements imported with the bundle; the protocol's budget is budget + these")
    separability_status = models.CharField(
        max_length=10, choices=[(s, s) for s in ("none", "pending", "running", "done", "failed")], default="none",
        help_text="separability of the comparisons (needs >= 2 samples per output)")
    separability_done = models.PositiveIntegerField(default=0, help_text="text pairs scored so far")
    separability_total = models.PositiveIntegerField(default=0)
    separability_error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # The key of the study's workers' completion codes (selectors.serving.worker_completion_code): made
    # at random with the study, never shown, exported or editable.
    completion_secret = models.CharField(max_length=64, default=completion_secret_new, editable=False)

    class Meta:
        verbose_name_plural = "studies"
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(condition=Q(gamma__gt=0) & Q(gamma__lt=1), name="study_gamma_in_0_1"),
            models.CheckConstraint(condition=Q(batch_size__gte=1), name="study_batch_size_positive"),
            models.CheckConstraint(condition=Q(session_hits_max=0) | Q(session_hits_max__gte=F("session_hits_min")),
                                   name="study_session_max_not_below_min"),
        ]

    def __str__(self) -> str:
        return self.name

    # The protocol's own parameters: every round's decision was made under them, so they are
    # fixed once the protocol has started (budget and item choice stay a researcher's to change):
    # the settings the table marks fixed, and the rubric's criteria.
    PROTOCOL_PARAMETERS = (*FIXED, "criteria")

    def setting_values(self) -> dict:
        """Every study setting's value (protocol/study_settings.py), the metric by its name
        ("" for none)."""
        return {name: (self.metric.name if self.metric_id else "") if setting.kind == METRIC else getattr(self, name)
                for name, setting in SETTINGS.items()}

    @property
    def guarantee(self) -> str:
        """What one pair's ± decision guarantees under this study's rule (annotation/guarantees.py)."""
        return guarantees.decision_guarantee(rule=self.protocol_rule, strict=self.protocol_strict)

    @property
    def family_guarantee(self) -> str:
        """What holds across the study's pairs; "" when nothing is claimed."""
        return guarantees.family_guarantee(rule=self.protocol_rule, family=self.family_control,
                                           design=self.design, planned=self.ranking_planned)

    @property
    def design(self) -> PairDesign:
        """The study's pair design (protocol.designs): every place that varies by design asks it."""
        return design_of(self.pair_design)

    @property
    def design_summary(self) -> str:
        """The design's settings in words, for the settings page ("" for none)."""
        return self.design.summary(self.ranking_order, self.active_settings)

    @property
    def active_settings(self) -> ActiveSettings:
        """The active design's settings (its rounds are the study's batch size)."""
        return ActiveSettings(confidence=self.ranking_confidence, resolution=self.ranking_resolution,
                              batch=self.batch_size, max_labels=self.ranking_max_labels, gamma=self.gamma)

    @property
    def ranking_planned(self) -> int:
        """The design's most pair runs over the systems of its initial order: C(k) for the sort,
        k (k - 1) / 2 for the active design (0 before the protocol starts or under the all-pairs
        design)."""
        return self.design.planned(self.ranking_order, self.active_settings)

    @property
    def decision_level(self) -> float:
        """The level each pair is decided at: γ, or γ / the planned runs under a ranking design."""
        return self.gamma / self.ranking_planned if self.ranking_planned else self.gamma

    @property
    def policy_warning(self) -> str:
        """The paper policy's measured false-decision rate when this study uses it; else ""."""
        return guarantees.policy_warning(policy=self.allocation_policy, rule=self.protocol_rule,
                                         strict=self.protocol_strict)

    @property
    def protocol_started(self) -> bool:
        """Has the protocol started (its pairs hold protocol state)? One query."""
        return self.pk is not None and self.pair_states.exclude(state={}).exists()

    def clean_fields(self, exclude=None) -> None:
        """Each field's validation, but a stored setting that is not being changed is not checked
        again: a value from before the bounds of the table (an older bundle's, say) stays until
        someone changes it, and a study holding one can still change its other settings."""
        exclude = set(exclude or ())
        if self.pk is not None:
            bounded = [name for name, setting in SETTINGS.items() if setting.kind != METRIC]
            stored = Study.objects.filter(pk=self.pk).values(*bounded).first() or {}
            exclude |= {name for name, value in stored.items() if getattr(self, name) == value}
        super().clean_fields(exclude=exclude)

    def clean(self) -> None:
        """The study's metric must be one of its own (another study's has no scores for these
        outputs), settings taken together must agree (protocol.study_settings.cross_problems),
        and the protocol's parameters may not change once the protocol has started."""
        errors = {}
        if self.metric_id is not None and self.metric.study_id != self.pk:
            errors["metric"] = (f"metric {self.metric.name!r} belongs to another study; "
                                "choose one of this study's metrics")
        criteria = tuple(c.name for c in parse_criteria(self.criteria)[0]) if self.criteria else ()
        unknown = [name for name in metric_names(self.combined_metrics, criteria)
                   if self.pk is not None and not Metric.objects.filter(study_id=self.pk, name=name).exists()]
        if unknown:
            errors["combined_metrics"] = (f"study {self.slug!r} has no metric or judge named {unknown[0]!r}; "
                                          "name metrics of this study, separated by commas")
        if self.criteria:
            _, problems = parse_criteria(self.criteria)
            if problems:
                errors["criteria"] = problems
        errors.update(cross_problems({name: getattr(self, name) for name, setting in SETTINGS.items()
                                      if setting.kind != METRIC}))
        design = DESIGNS.get(self.pair_design)  # None: the field's own check refuses the name
        if design:
            errors.update(design.problems(rule=self.protocol_rule, policy=self.allocation_policy,
                                               family=self.family_control, criteria=len(self.criteria),
                                               max_labels=self.ranking_max_labels))
        started = self.pk is not None and self.protocol_started
        if started and self.status == self.Status.DRAFT:
            errors["status"] = "a study whose protocol has started cannot become a draft again; pause it instead"
        elif not started and self.pk is not None and self.status != self.Status.DRAFT and \
                Study.objects.filter(pk=self.pk, status=self.Status.DRAFT).exists():
            errors["status"] = "a draft is launched from its settings page (the launch starts the protocol)"
        if started:
            stored = Study.objects.filter(pk=self.pk).values(*(
                f"{f}_id" if f == "metric" else f for f in self.PROTOCOL_PARAMETERS)).first() or {}
            for name in self.PROTOCOL_PARAMETERS:
                attribute = f"{name}_id" if name == "metric" else name
                if attribute in stored and getattr(self, attribute) != stored[attribute]:
                    errors.setdefault(name, f"{self._meta.get_field(name).verbose_name} is fixed once the protocol "
                                            "has started: the decisions so far were made with it")
        if errors:
            raise ValidationError(errors)


class StudyMembership(models.Model):
    class Role(models.TextChoices):
        RESEARCHER = "researcher", "Researcher"
        ANNOTATOR = "annotator", "Annotator"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="study_memberships")
    role = models.CharField(max_length=12, choices=Role.choices)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["study", "user"], name="membership_unique_user")]

    def __str__(self) -> str:
        return f"{self.user} · {self.role} · {self.study}"


class System(models.Model):
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="systems")
    name = models.CharField(max_length=200)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["study", "name"], name="system_unique_name")]

    def __str__(self) -> str:
        return self.name


class Item(models.Model):
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="items")
    external_id = models.CharField(max_length=200)
    input = models.TextField()  # a conversation's messages_text (protocol/bundle.py)
    # The input as a conversation, [{"role", "content"}, ...], when the bundle gave one; None for a text.
    input_messages = models.JSONField(null=True, blank=True)
    reference = models.TextField(blank=True)
    # A markdown study's texts as HTML, rendered once at import (annotation/rendering.py
    # stored_html); "" in a plain study, whose texts are escaped when shown.
    input_html = models.TextField(blank=True, editable=False)
    reference_html = models.TextField(blank=True, editable=False)
    position = models.PositiveIntegerField(default=0, help_text="order in the imported bundle")
    withdrawn = models.BooleanField(default=False, help_text="never served again (e.g. flagged as broken)")
    # The bundle's prompt_kind (protocol/bundle.py): every item of a study has one or none has.
    prompt_kind = models.CharField(max_length=MAX_PROMPT_KIND, blank=True, default="",
                                   help_text="the kind of prompt (the active design's prompt-kind model)")

    class Meta:
        ordering = ["position"]
        constraints = [models.UniqueConstraint(fields=["study", "external_id"], name="item_unique_external_id")]

    def __str__(self) -> str:
        return self.external_id


class Output(models.Model):
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="outputs")
    system = models.ForeignKey(System, on_delete=models.CASCADE, related_name="outputs")
    sample = models.PositiveIntegerField(default=0)
    # May be empty: a system that generated nothing is real data (docs/bundle-format.md).
    text = models.TextField(blank=True)
    # The system's turns of a conversation, [{"role", "content"}, ...]; None for a text.
    messages = models.JSONField(null=True, blank=True)
    html = models.TextField(blank=True, editable=False, help_text="rendered at import (markdown studies)")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["item", "system", "sample"], name="output_unique_sample"),
        ]

    def __str__(self) -> str:
        return f"{self.item} · {self.system} · {self.sample}"


class Metric(models.Model):
    class Kind(models.TextChoices):
        SCORE = "score", "Scalar score per output"
        PREFERENCE = "preference", "Pairwise preference"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="metrics")
    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=10, choices=Kind.choices)
    tie_margin = models.FloatField(default=0.0, help_text="|s1 - s2| <= margin counts as a tie")

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["study", "name"], name="metric_unique_name"),
            models.CheckConstraint(condition=Q(tie_margin__gte=0), name="metric_tie_margin_non_negative"),
        ]

    def __str__(self) -> str:
        return self.name


class MetricScore(models.Model):
    metric = models.ForeignKey(Metric, on_delete=models.CASCADE, related_name="scores")
    output = models.ForeignKey(Output, on_delete=models.CASCADE, related_name="metric_scores")
    value = models.FloatField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["metric", "output"], name="metric_score_unique")]


class MetricPreference(models.Model):
    metric = models.ForeignKey(Metric, on_delete=models.CASCADE, related_name="preferences")
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="metric_preferences")
    first = models.ForeignKey(System, on_delete=models.CASCADE, related_name="+")
    second = models.ForeignKey(System, on_delete=models.CASCADE, related_name="+")
    value = models.SmallIntegerField()
    judge = models.CharField(max_length=200, blank=True, help_text="the judge model, when known")
    prompt = models.TextField(blank=True, help_text="the judge's prompt (name or text), when known")
    # Which of (first, second) the judge saw first, in this row's canonical order: "AB" first,
    # "BA" second, "" unknown. Both orders of one judge are two rows.
    order = models.CharField(max_length=2, blank=True, choices=[("AB", "first shown first"),
                                                                ("BA", "second shown first")])

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["metric", "item", "first", "second", "order"],
                                    name="metric_preference_unique"),
            models.CheckConstraint(condition=PREFERENCE_VALUES, name="metric_preference_value_valid"),
            models.CheckConstraint(condition=~Q(first=models.F("second")), name="metric_preference_two_systems"),
        ]


class HumanScore(models.Model):
    """A scalar human rating imported with the study (e.g. expert Likert scores).

    Reference data for meta-evaluation and offline replay; live judgements are Judgements.
    """

    output = models.ForeignKey(Output, on_delete=models.CASCADE, related_name="human_scores")
    annotator_label = models.CharField(max_length=200, blank=True)
    value = models.FloatField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["output", "annotator_label"],
                condition=~Q(annotator_label=""),
                name="human_score_unique_annotator",
            )
        ]


class Comparison(models.Model):
    """One item shown for one system pair (canonical order).

    ``judgement_count`` and ``lease_expires_at`` are serving's counters, written with the
    judgement or lease they count (services/hits.py) so that choosing a comparison reads
    columns instead of aggregating judgements and leases per request. A comparison has at
    most one live lease: ``lease_expires_at`` is that lease's expiry (None = free).
    """

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="comparisons")
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="comparisons")
    first = models.ForeignKey(System, on_delete=models.CASCADE, related_name="+")
    second = models.ForeignKey(System, on_delete=models.CASCADE, related_name="+")
    separability = models.FloatField(null=True, blank=True)
    self_first = models.FloatField(null=True, blank=True)
    self_second = models.FloatField(null=True, blank=True)
    cross = models.FloatField(null=True, blank=True)
    pair = models.ForeignKey("PairState", null=True, blank=True, on_delete=models.CASCADE,
                             related_name="comparisons")
    judgement_count = models.PositiveIntegerField(default=0)
    lease_expires_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["item", "first", "second"], name="comparison_unique"),
            models.CheckConstraint(condition=~Q(first=models.F("second")), name="comparison_two_systems"),
        ]
        indexes = [
            models.Index(fields=["study", "first", "second"], name="comparison_pair_idx"),
            models.Index(fields=["pair", "judgement_count"], name="comparison_serving_idx"),
            models.Index(fields=["study", "lease_expires_at"], name="comparison_lease_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.item} · {self.first} vs {self.second}"


class Annotator(models.Model):
    """Who judges: a logged-in user, or an external crowd worker: one platform session of a
    worker id (platform + worker id + the platform's session id).

    A worker id in a link is no secret, so it alone names nobody: keyed by the session too, a
    visitor who typed a real worker's id first works as their own session, and the genuine
    worker, arriving with their session, is not locked out (researchers match sessions
    against the platform's submission list, docs/crowd.md). Crowd workers from before this
    keep ``session_id`` "" and their one binding (CrowdSession).
    """

    class Platform(models.TextChoices):
        LOCAL = "local", "Local account"
        PROLIFIC = "prolific", "Prolific"
        MTURK = "mturk", "Amazon MTurk"
        IMPORT = "import", "Imported with the study"

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="annotator"
    )
    platform = models.CharField(max_length=10, choices=Platform.choices, default=Platform.LOCAL)
    external_id = models.CharField(max_length=200)
    session_id = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["platform", "external_id", "session_id"],
                                    name="annotator_unique_external_session"),
        ]

    def __str__(self) -> str:
        return f"{self.platform}:{self.external_id}" + (f" ({self.session_id})" if self.session_id else "")


class JudgementKind(models.TextChoices):
    """What a HIT is for. Only REAL judgements of workers who are not excluded reach the
    protocol, decisions, reports and counters (selectors.quality.counted_judgements)."""

    REAL = "real", "Real comparison"
    CHECK = "check", "Attention or gold check"
    REPEAT = "repeat", "Repeat of an earlier comparison"


class Assignment(models.Model):
    """A lease of one comparison to one annotator (a HIT)."""

    class State(models.TextChoices):
        LEASED = "leased", "Leased"
        SUBMITTED = "submitted", "Submitted"
        EXPIRED = "expired", "Expired"
        SKIPPED = "skipped", "Skipped"  # given back by its annotator, never served to them again

    annotator = models.ForeignKey(Annotator, on_delete=models.CASCADE, related_name="assignments")
    # A real or repeat HIT has a comparison; a check HIT has a check item instead (kind CHECK).
    comparison = models.ForeignKey(Comparison, null=True, blank=True, on_delete=models.CASCADE,
                                   related_name="assignments")
    check_item = models.ForeignKey("CheckItem", null=True, blank=True, on_delete=models.CASCADE,
                                   related_name="assignments")
    shown_swapped = models.BooleanField(default=False, help_text="second system shown on the left")
    round = models.PositiveIntegerField(default=0)
    issued_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    state = models.CharField(max_length=10, choices=State.choices, default=State.LEASED)
    kind = models.CharField(max_length=6, choices=JudgementKind.choices, default=JudgementKind.REAL)
    draw_probability = models.FloatField(
        null=True, blank=True,
        help_text="chance with which the comparison was drawn among the open ones (separability-weighted "
                  "or stratified choice; empty for uniform choice); the decision weights items by it")

    class Meta:
        indexes = [
            models.Index(fields=["comparison", "state"], name="assignment_comparison_state"),
            models.Index(fields=["annotator", "state"], name="assignment_annotator_state"),
            models.Index(fields=["state", "expires_at"], name="assignment_expiry"),
        ]


class Judgement(models.Model):
    """A human preference in canonical order (+1 = comparison.first better)."""

    class Source(models.TextChoices):
        LIVE = "live", "Collected in evalapp"
        IMPORT = "import", "Imported with the study"

    # A check's answer has no comparison (so no reader of comparisons ever sees it) but its check
    # item; value is then in the check's own order (+1 = its first text better).
    comparison = models.ForeignKey(Comparison, null=True, blank=True, on_delete=models.CASCADE,
                                   related_name="judgements")
    check_item = models.ForeignKey("CheckItem", null=True, blank=True, on_delete=models.CASCADE,
                                   related_name="judgements")
    annotator = models.ForeignKey(Annotator, on_delete=models.CASCADE, related_name="judgements")
    assignment = models.OneToOneField(
        Assignment, null=True, blank=True, on_delete=models.CASCADE, related_name="judgement"
    )
    value = models.SmallIntegerField()
    # A rubric study's answers, canonical order: {criterion: {"value": -1/0/1, "strength": 1/2
    # (with a strength scale), "reason": "..."}}; ``value`` is then the first criterion's value.
    answers = models.JSONField(null=True, blank=True)
    seconds_on_task = models.FloatField(null=True, blank=True, help_text="the client's claim")
    read_seconds = models.FloatField(
        null=True, blank=True, help_text="measured in the browser: from the texts shown to the first answer given")
    server_seconds = models.FloatField(
        null=True, blank=True, help_text="measured by the server: from the HIT's render (lease) to the answer")
    kind = models.CharField(max_length=6, choices=JudgementKind.choices, default=JudgementKind.REAL)
    idempotency_key = models.CharField(max_length=64, null=True, blank=True, unique=True)
    source = models.CharField(max_length=6, choices=Source.choices, default=Source.LIVE)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=PREFERENCE_VALUES, name="judgement_value_valid"),
            # A repeat (kind "repeat") is the same comparison judged again on purpose.
            models.UniqueConstraint(fields=["comparison", "annotator"], condition=Q(kind="real"),
                                    name="judgement_once_per_annotator"),
        ]
        indexes = [models.Index(fields=["comparison"], name="judgement_comparison")]


class PairState(models.Model):
    """The protocol state of one system pair.

    ``state`` is ``protocol.adaptive.PairState.to_dict(with_metric=False)`` (the metric's labels
    come from its scores: serving/metric_labels.py); the protocol's settings come from the
    Study row. Only serving/protocol_state.py reads or writes ``state`` and the columns
    that mirror it (status, decision, theta, round, quota_left), always together, and bumps
    ``version`` on every write so that a round close computed from a snapshot can be applied
    compare-and-set. ``leased`` counts the pair's live leases (serving's counter, not protocol
    state): serving leases only while ``quota_left > leased``.
    """

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="pair_states")
    first = models.ForeignKey(System, on_delete=models.CASCADE, related_name="+")
    second = models.ForeignKey(System, on_delete=models.CASCADE, related_name="+")
    status = models.CharField(max_length=10, default="waiting")
    decision = models.SmallIntegerField(default=0)
    theta = models.FloatField(null=True, blank=True)
    theta_se = models.FloatField(null=True, blank=True)
    round = models.PositiveIntegerField(default=0)
    quota_left = models.PositiveIntegerField(default=0)
    leased = models.PositiveIntegerField(default=0)
    version = models.PositiveIntegerField(default=0)
    state = models.JSONField(default=dict)
    # A rubric study's other lanes and the pair's HITs (protocol.rubric):
    # {"hits": n, "lanes": {criterion: PairState.to_dict(with_metric=False)}}; {} for one criterion.
    criteria_state = models.JSONField(default=dict, blank=True)
    # What a round close reads of the pairs it does not close (issue 41: a close decodes only
    # the pairs it closes or opens), summed or filtered in SQL; mirrors of ``state`` written by
    # the codec with it: the pair's HITs, its first lane's log e-value as the family rule reads
    # it (rules.pair_log_e_value; null: e = 0) and its control-variate moments
    # (machine.pair_moments: n, s, m, ss, mm, sm).
    hits = models.PositiveIntegerField(default=0)
    log_e_value = models.FloatField(null=True, blank=True)
    cv_n = models.FloatField(default=0.0)
    cv_s = models.FloatField(default=0.0)
    cv_m = models.FloatField(default=0.0)
    cv_ss = models.FloatField(default=0.0)
    cv_mm = models.FloatField(default=0.0)
    cv_sm = models.FloatField(default=0.0)
    # and its part of the futility check's level prior (machine.pair_level_sums: counted, x^2,
    # x m, m^2, v; zeros for a pair without a metric or with fewer steps than the fit counts)
    level_k = models.FloatField(default=0.0)
    level_xx = models.FloatField(default=0.0)
    level_xm = models.FloatField(default=0.0)
    level_mm = models.FloatField(default=0.0)
    level_v = models.FloatField(default=0.0)
    # The same of a rubric's other lanes, each its own family and control variate (protocol.rubric):
    # {criterion: [log e-value (null: e = 0), n, s, m, ss, mm, sm, level k, xx, xm, mm, v]}; {} for
    # one criterion. Summed
    # by group of pairs in Python, not SQL (protocol_state._study_totals).
    lanes_close = models.JSONField(default=dict, blank=True)
    # A study that combines metrics (Study.combined_metrics): each lane's share of the
    # cross-fitted calibration over the pair's judged items, {criterion: [the metrics combined,
    # x'x (q x q, row by row) + x'y (q,)]} (protocol.control_variate.calibration_sums; integers),
    # {} otherwise; summed by group of pairs in Python (protocol_state._study_totals). A row
    # written before, or for other metrics, is summed from its state (protocol_state._calibration_of).
    calibration = models.JSONField(default=dict, blank=True)
    # Serving's tie-break between open pairs equally close to full (not protocol state): drawn
    # anew by the database whenever the codec writes the row (store._pair_save_sql: the start,
    # a submit, a close that opens the pair's next round), so that a lease reads the first
    # open pairs in the serving index's order instead of sorting every open pair by a RANDOM()
    # drawn per read (19,900 at 200 systems: docs/serving.md, "The loop").
    tie = models.FloatField(default=0.0)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["study", "first", "second"], name="pair_state_unique"),
            models.CheckConstraint(condition=Q(decision__in=(-1, 0, 1)), name="pair_state_decision_valid"),
        ]
        # Serving's open pairs are read from this index alone (every column store.open_pairs
        # reads is in it): reading them from the rows walked each row's protocol state JSON
        # (tens of KB at 2,000 items, stored before ``leased``), 1,225 rows per lease at 50 systems.
        # In the order a lease tries them (closest to full first, then the tie-break), so that a
        # lease reads its first few entries, not every open pair of the study.
        indexes = [models.Index(F("study"), F("status"), F("quota_left") - F("leased"), F("tie"), F("quota_left"),
                                F("leased"), F("round"), F("first"), F("second"), name="pair_state_serving_idx"),
                   # a close reads the e-values that may pass the family rule's bar, not every row
                   models.Index(fields=["study", "log_e_value"], name="pair_state_family_idx"),
                   # and sums the others' budget and moments from this index alone: the rows
                   # hold each pair's state JSON (tens of KB), 23 of a close's 32 ms at 19,900 pairs;
                   # by group of pairs (their first system), each group's version sum first, so
                   # that only the groups that moved are summed again (protocol_state._study_totals)
                   models.Index(fields=["study", "first", "version", "hits", "quota_left", "cv_n", "cv_s", "cv_m",
                                        "cv_ss", "cv_mm", "cv_sm", "level_k", "level_xx", "level_xm", "level_mm",
                                        "level_v"], name="pair_state_totals_idx")]


class PairStateHistory(models.Model):
    pair_state = models.ForeignKey(PairState, on_delete=models.CASCADE, related_name="history")
    round = models.PositiveIntegerField()
    decision = models.SmallIntegerField()
    theta = models.FloatField(null=True, blank=True)
    theta_se = models.FloatField(null=True, blank=True)
    counts = models.JSONField(default=dict)
    judgements = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at"]


class CrowdSession(models.Model):
    """A crowd worker's entry into a study, with the platform's session id (Prolific
    SESSION_ID, MTurk assignmentId): the binding a Django session's annotator must have to
    work in the study (access.access_study_worker). Another platform session with the same
    worker id is another Annotator, with its own work and its own completion code.
    """

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="crowd_sessions")
    annotator = models.ForeignKey(Annotator, on_delete=models.CASCADE, related_name="crowd_sessions")
    platform_session_id = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)
    # An entry from before migration 0021 keeps the code it was given then (its MAC part, made
    # with the server's SECRET_KEY): a code already handed out stays valid. Empty otherwise.
    legacy_code_mac = models.CharField(max_length=16, blank=True, default="", editable=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["study", "annotator"], name="crowd_session_one_per_worker"),
            models.CheckConstraint(condition=~Q(platform_session_id=""), name="crowd_session_id_not_empty"),
        ]

    def __str__(self) -> str:
        return f"{self.annotator} · {self.study} · {self.platform_session_id}"


class ItemFlag(models.Model):
    """An annotator's report of a problem with an item (shown to researchers in the admin)."""

    class Reason(models.TextChoices):
        BROKEN = "broken", "Text is broken, cut off or unreadable"
        IDENTICAL = "identical", "The two outputs are identical"
        LANGUAGE = "language", "Wrong language"
        OFFENSIVE = "offensive", "Offensive or harmful content"
        OTHER = "other", "Something else"

    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="flags")
    assignment = models.ForeignKey(Assignment, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    annotator = models.ForeignKey(Annotator, on_delete=models.CASCADE, related_name="flags")
    reason = models.CharField(max_length=10, choices=Reason.choices)
    note = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.item} · {self.get_reason_display()}"


class CheckItem(models.Model):
    """An attention or gold check (bundle kind ``check``): an input, two texts and the answers
    accepted. Not an Item: it has no system, no comparison and no pair, so the protocol never
    sees it. Served by services/checks.py."""

    class Expected(models.TextChoices):
        FIRST = "first", "The first text is better"
        SECOND = "second", "The second text is better"
        TIE = "tie", "About the same"
        EITHER = "either", "Either text, but not a tie"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="check_items")
    external_id = models.CharField(max_length=200)
    input = models.TextField()
    reference = models.TextField(blank=True)
    first = models.TextField(blank=True)
    second = models.TextField(blank=True)
    # Rendered at import in a markdown study, as Item's and Output's are.
    input_html = models.TextField(blank=True, editable=False)
    reference_html = models.TextField(blank=True, editable=False)
    first_html = models.TextField(blank=True, editable=False)
    second_html = models.TextField(blank=True, editable=False)
    expected = models.CharField(max_length=6, choices=Expected.choices)
    position = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["position"]
        constraints = [models.UniqueConstraint(fields=["study", "external_id"], name="check_unique_external_id")]

    def __str__(self) -> str:
        return self.external_id

    @property
    def accepted(self) -> tuple[int, ...]:
        """The answers the check accepts, in its own order (protocol.bundle.CHECK_EXPECTED)."""
        return CHECK_EXPECTED[self.expected]


class AnnotatorExclusion(models.Model):
    """Whether a worker's judgements are left out of a study's protocol (docs/quality.md).

    One row per (study, annotator) once anyone excluded them; ``excluded`` False = re-included.
    Every change is also written to ExclusionEvent (the audit log).
    """

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="exclusions")
    annotator = models.ForeignKey(Annotator, on_delete=models.CASCADE, related_name="exclusions")
    excluded = models.BooleanField(default=True)
    reason = models.CharField(max_length=500, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["study", "annotator"], name="exclusion_one_per_worker")]

    def __str__(self) -> str:
        return f"{self.annotator} · {self.study} · {'excluded' if self.excluded else 'included'}"


class ExclusionEvent(models.Model):
    """The audit log of exclusions: who (a user, or a study rule when ``user`` is None) did what."""

    class Action(models.TextChoices):
        EXCLUDE = "exclude", "Excluded"
        INCLUDE = "include", "Re-included"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="exclusion_events")
    annotator = models.ForeignKey(Annotator, on_delete=models.CASCADE, related_name="+")
    action = models.CharField(max_length=8, choices=Action.choices)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                             related_name="+")
    rule = models.CharField(max_length=40, blank=True, help_text="the flag whose study rule acted (no user)")
    reason = models.CharField(max_length=500, blank=True)
    judgements = models.PositiveIntegerField(default=0, help_text="real judgements of the worker at the time")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]


class PlanJob(models.Model):
    """One run of the planner (protocol.plan) for a study, computed off the request path.

    params: {"use_human": bool (fit the assumptions from the study's human labels and replay
    the pairs they label completely), "assumptions": the stated ones (used without human
    labels), "budgets": [int or None], "batches": [int], "gammas": [float], "reps": int,
    "policy": str, "throughput": judgements per hour, "rule": the study's decision rule,
    "design": protocol.plan's design, "start": the study's initial order, "active": the active
    design's confidence, resolution and max_labels}; result: protocol.plan's summary.
    """

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="plan_jobs")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    params = models.JSONField()
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.QUEUED)
    done = models.PositiveIntegerField(default=0, help_text="replays finished")
    total = models.PositiveIntegerField(default=0, help_text="replays to run")
    result = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True,
                                        help_text="last sign of life of the run (its start, each replay)")
    attempts = models.PositiveIntegerField(default=0, help_text="runs started (the sweep resumes a stalled one)")

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [models.CheckConstraint(condition=Q(done__lte=models.F("total")) | Q(total=0),
                                              name="plan_job_done_within_total")]

    def __str__(self) -> str:
        return f"plan {self.pk} · {self.study} · {self.status}"

    @property
    def design(self):
        """The pair design (protocol.designs) whose replay the plan ran; None: no registered
        design replays so any more."""
        replay = self.params.get("design", "all_pairs")  # a job stored before ranking plans planned all pairs
        return next((d for d in DESIGNS.values() if d.plan_replay == replay), None)

    @property
    def active_settings(self) -> ActiveSettings | None:
        """The active design's settings the plan replayed (its confidence, resolution and
        max_labels; the grid gives the rest); None for a job of another design, or stored
        before active plans."""
        return ActiveSettings(**self.params["active"]) if "active" in self.params else None

    @property
    def per_comparison(self) -> bool:
        """Are the plan's budgets the most labels per comparison (the replay of a design that
        plans so, protocol.designs), not a study's budget?"""
        return bool(self.design and self.design.plan_per_comparison)

    @property
    def percent(self) -> int:
        return int(100 * self.done / self.total) if self.total else 0


class JudgeRun(models.Model):
    """One run of an LLM judge over a study's comparisons (services/judges.py, docs/judges.md):
    its settings, its progress and what it cost. Its verdicts are the study's MetricPreference
    rows of ``metric_name`` (a rubric: ``metric_name:criterion`` per criterion judged); its calls
    are JudgeCall rows (the cache). The API key is never stored: ``api_key_env`` names the
    environment variable the process that runs it reads the key from.

    done counts (comparison, criterion, order) units finished: a verdict stored, or unparsed;
    a unit found finished by an earlier run counts as done (``already``) without a call.
    """

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    class Scope(models.TextChoices):
        ALL = "all", "Every comparison (each item of each pair)"
        UNDECIDED_FIRST = "undecided_first", "Every comparison, the pairs still undecided first"
        UNDECIDED = "undecided", "Only the pairs still undecided"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="judge_runs")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    metric_name = models.CharField(max_length=150, help_text="the metric its verdicts are stored as")
    model = models.CharField(max_length=200, help_text="the judge model, as the endpoint names it")
    base_url = models.CharField(max_length=500, help_text="the OpenAI-compatible endpoint (…/v1)")
    api_key_env = models.CharField(max_length=100, help_text="the environment variable holding the API key")
    prompt_name = models.CharField(max_length=200)
    prompt_system = models.TextField(blank=True)
    prompt_template = models.TextField()
    criteria = models.JSONField(default=list, blank=True, help_text="the criteria judged (names)")
    both_orders = models.BooleanField(default=True)
    samples = models.PositiveIntegerField(default=1, validators=[MinValueValidator(1)])
    concurrency = models.PositiveIntegerField(default=4, validators=[MinValueValidator(1)])
    scope = models.CharField(max_length=16, choices=Scope.choices, default=Scope.ALL)
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.QUEUED)
    total = models.PositiveIntegerField(default=0, help_text="units (comparison, criterion, order) to judge")
    done = models.PositiveIntegerField(default=0, help_text="units finished (stored or unparsed)")
    already = models.PositiveIntegerField(default=0, help_text="units an earlier run had finished")
    verdicts = models.PositiveIntegerField(default=0, help_text="verdicts stored by this run")
    unparsed = models.PositiveIntegerField(default=0, help_text="units whose every sample named no verdict")
    cache_hits = models.PositiveIntegerField(default=0, help_text="calls answered from the cache")
    retries = models.PositiveIntegerField(default=0, help_text="calls tried again after a 429, 5xx or timeout")
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True, help_text="last sign of life (its start, each batch)")
    attempts = models.PositiveIntegerField(default=0, help_text="times started (a resume is one more)")
    owner = models.CharField(max_length=300, blank=True, help_text="host:pid of the process running it")

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [models.CheckConstraint(condition=Q(samples__gte=1) & Q(concurrency__gte=1),
                                              name="judge_run_samples_concurrency_positive")]

    def __str__(self) -> str:
        return f"judge {self.pk} · {self.study} · {self.model} · {self.status}"

    @property
    def percent(self) -> int:
        return int(100 * self.done / self.total) if self.total else 0

    @property
    def running(self) -> bool:
        return self.status in (self.Status.QUEUED, self.Status.RUNNING)


class JudgeCall(models.Model):
    """One answered call of a judge: the cache (docs/judges.md). ``key`` is
    protocol.judge_prompts.call_key (model, the messages with the two texts in the order shown,
    order, sample, temperature), so a rerun or a resumed run never pays for it again, in any
    study. ``verdict`` in the order shown (+1 the first answer better, -1 the second, 0 a
    tie; None unparsed); ``run`` the run that paid for it."""

    key = models.CharField(max_length=64, unique=True)
    run = models.ForeignKey(JudgeRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="calls")
    model = models.CharField(max_length=200)
    content = models.TextField(blank=True)
    verdict = models.SmallIntegerField(null=True, blank=True)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    seconds = models.FloatField(default=0.0, help_text="the call's time, retries included")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.CheckConstraint(condition=Q(verdict__isnull=True) | Q(verdict__in=(-1, 0, 1)),
                                              name="judge_call_verdict_valid")]


class JudgeUnparsed(models.Model):
    """A comparison in one order whose every sample named no verdict: not a tie, so no
    MetricPreference row; kept so that a resumed run does not count it twice."""

    metric = models.ForeignKey(Metric, on_delete=models.CASCADE, related_name="unparsed")
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="+")
    first = models.ForeignKey(System, on_delete=models.CASCADE, related_name="+")
    second = models.ForeignKey(System, on_delete=models.CASCADE, related_name="+")
    order = models.CharField(max_length=2)
    run = models.ForeignKey(JudgeRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["metric", "item", "first", "second", "order"],
                                               name="judge_unparsed_unique")]
