from django import forms
from django.contrib.auth.forms import PasswordResetForm
from django.core.mail import EmailMultiAlternatives
from django.template.loader import render_to_string


class MailNotSent(Exception):
    """The password reset mail could not be handed to the mail server."""


class MailingPasswordResetForm(PasswordResetForm):
    """Django's form, except that a mail that cannot be sent is an error, not a log line
    behind a page saying it was sent."""

    def send_mail(self, subject_template_name, email_template_name, context, from_email, to_email,
                  html_email_template_name=None):
        subject = "".join(render_to_string(subject_template_name, context).splitlines())
        message = EmailMultiAlternatives(subject, render_to_string(email_template_name, context), from_email,
                                         [to_email])
        try:
            message.send()
        except Exception as exc:  # smtplib and socket errors alike: the mail did not go
            raise MailNotSent(str(exc)) from exc

from .guarantees import PAPER_POLICY_WARNING
from .models import (
    ACTIVE_DEFAULTS,
    MIN_ITEM_CHOICE_TEMPERATURE,
    RANKING_CONFIDENCE_HELP,
    RANKING_RESOLUTION_HELP,
    TEMPERATURE_REASON,
    Study,
)


class StudyUploadForm(forms.Form):
    """The upload's first step: the file (validated at once) and the study's address."""

    bundle = forms.FileField(help_text="Study bundle: .jsonl or .jsonl.gz")
    slug = forms.SlugField(required=False, help_text="URL name; default: from the study's name")


HUMAN_ONLY = "none"
METRIC_PREFIX = "metric:"  # metric names are free text: a prefix keeps them apart from HUMAN_ONLY


class StudyMetricChoiceForm(forms.Form):
    """The upload's second step: which of the bundle's metrics the protocol combines with the
    humans, or explicitly none. ``metrics``: the staged bundle's summary's ``metrics``."""

    staged = forms.CharField(widget=forms.HiddenInput)
    metric = forms.ChoiceField(label="Metric for the protocol", error_messages={
        "required": 'Choose the metric for the protocol, or "No metric: human-only study".'})
    slug = forms.SlugField(required=False, help_text="URL name; default: from the study's name")

    def __init__(self, *args, metrics: list[dict], **kwargs):
        super().__init__(*args, **kwargs)
        kinds = {"score": "score per output", "preference": "pairwise preference"}
        self.fields["metric"].choices = [("", "— choose a metric —")] + [
            (METRIC_PREFIX + m["name"], f"{m['name']} ({kinds.get(m['kind'], m['kind'])})") for m in metrics
        ] + [(HUMAN_ONLY, "No metric: human-only study")]
        self.fields["metric"].widget.attrs["aria-describedby"] = "human-only-warning"

    def chosen_metric(self) -> str:
        """The metric's name for services.study_import; "" for a human-only study."""
        value = self.cleaned_data["metric"]
        return "" if value == HUMAN_ONLY else value.removeprefix(METRIC_PREFIX)


class StudySettingsForm(forms.Form):
    """What a researcher may change while a study runs (see services.study_settings_update)."""

    status = forms.ChoiceField(choices=[("running", "Running"), ("paused", "Paused"), ("finished", "Finished")])
    budget = forms.IntegerField(min_value=0, help_text="human judgements the protocol may spend")
    lease_timeout_seconds = forms.IntegerField(min_value=30, max_value=86400,
                                               help_text="seconds an annotator keeps a HIT")
    completion_code = forms.CharField(required=False, max_length=64,
                                      help_text="shown to crowd workers when their work is done")
    instructions = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 6}))
    item_choice = forms.ChoiceField(choices=[("uniform", "Uniform"), ("weighted", "Separability-weighted"),
                                             ("stratified", "Stratified by separability")])
    item_choice_temperature = forms.FloatField(
        min_value=MIN_ITEM_CHOICE_TEMPERATURE, max_value=10.0,
        error_messages={"min_value": f"Must be at least %(limit_value)s: {TEMPERATURE_REASON}."},
        help_text=f"weighted choice: lower = stronger preference for separable items; at least "
                  f"{MIN_ITEM_CHOICE_TEMPERATURE}, because {TEMPERATURE_REASON}")


class StudyDraftForm(forms.Form):
    """A draft's protocol parameters (services.study_draft_update); ``metrics``: the study's own
    metric names. Once launched they are fixed (Study.PROTOCOL_PARAMETERS)."""

    metric = forms.ChoiceField(label="Metric for the protocol")
    gamma = forms.FloatField(label="γ (error level per decision)", min_value=0.001, max_value=0.5,
                             help_text="e.g. 0.05; smaller = more judgements per decision")
    batch_size = forms.IntegerField(min_value=1, max_value=1000, help_text="judgements per pair per round")
    budget = forms.IntegerField(min_value=1, help_text="human judgements the protocol may spend")
    ratings_per_item = forms.IntegerField(min_value=1, max_value=100,
                                          help_text="judgements one comparison may receive")
    protocol_rule = forms.ChoiceField(label="Decision rule", choices=Study.Rule.choices,
                                      help_text="error-controlled: false ± ≤ γ under any number of looks; "
                                                "the paper's rule tests at γ per look only")
    allocation_policy = forms.ChoiceField(choices=[("adaptive", "Adaptive"),
                                                   ("paper", f"Paper (Algorithm 2) — {PAPER_POLICY_WARNING}")])
    family_control = forms.ChoiceField(label="Family control across pairs", choices=Study.FamilyControl.choices,
                                       help_text="with the error-controlled rule")
    pair_design = forms.ChoiceField(label="Pairs decided", choices=Study.PairDesign.choices,
                                    help_text="ranking (many systems): a merge sort decides the pairs it needs, each "
                                              "at γ / C(k); active: labels where the fitted order is least sure, "
                                              "until it is resolved; both need family control 'none'")
    ranking_max_labels = forms.IntegerField(
        label="Labels per comparison", min_value=0, required=False,
        help_text="ranking designs: most judgements one pair may take, its resolution (a pair still "
                  "undecided then is a tie); 0 or empty = all of its items")
    ranking_confidence = forms.FloatField(
        label="Confidence", min_value=0.5, max_value=0.999999, required=False,
        help_text=f"{RANKING_CONFIDENCE_HELP} (empty: {ACTIVE_DEFAULTS.confidence})")
    ranking_resolution = forms.FloatField(
        label="Resolution", min_value=0.0, required=False,
        help_text=f"{RANKING_RESOLUTION_HELP} (empty: {ACTIVE_DEFAULTS.resolution})")
    item_choice = forms.ChoiceField(choices=[("uniform", "Uniform"), ("weighted", "Separability-weighted"),
                                             ("stratified", "Stratified by separability")])

    def __init__(self, *args, metrics: list[str], **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["metric"].choices = [(METRIC_PREFIX + m, m) for m in metrics] + [
            (HUMAN_ONLY, "No metric: human-only study")]

    def clean_ranking_max_labels(self) -> int:
        return self.cleaned_data.get("ranking_max_labels") or 0

    def clean_ranking_confidence(self) -> float:
        value = self.cleaned_data.get("ranking_confidence")
        return ACTIVE_DEFAULTS.confidence if value is None else value

    def clean_ranking_resolution(self) -> float:
        value = self.cleaned_data.get("ranking_resolution")
        return ACTIVE_DEFAULTS.resolution if value is None else value

    def chosen_metric(self) -> str:
        """The metric's name; "" for a human-only study."""
        value = self.cleaned_data["metric"]
        return "" if value == HUMAN_ONLY else value.removeprefix(METRIC_PREFIX)


class StudyCrowdSettingsForm(forms.Form):
    """A crowd worker's session (docs/crowd.md); shown on the settings page under the above.

    A field left out keeps the study's value (the settings form without this part still works).
    """

    session_hits_min = forms.IntegerField(min_value=1, required=False, label="Comparisons for the completion code",
                                          help_text="a worker gets the code after this many")
    session_hits_max = forms.IntegerField(min_value=0, required=False, label="Most comparisons per worker",
                                          help_text="0 = no limit")
    session_minutes = forms.IntegerField(min_value=0, required=False, label="Session time limit (minutes)",
                                         help_text="no new comparison after this long; 0 = no limit")
    min_seconds_per_hit = forms.IntegerField(min_value=0, max_value=3600, required=False, label="Minimum seconds per comparison",
                                             help_text="the answer buttons unlock after this long")

    def clean(self):
        data = super().clean()
        low, high = data.get("session_hits_min"), data.get("session_hits_max")
        if low is not None and high and high < low:  # both given; else the service's full_clean checks
            self.add_error("session_hits_max", f"must be 0 or at least {low} (the comparisons for the code)")
        return data


class StudyQualitySettingsForm(forms.Form):
    """Checks and exclusion rules (docs/quality.md); on the settings page. Applied only when the
    page's quality fieldset was sent (``quality_form``), so other forms leave them alone."""

    quality_form = forms.CharField(widget=forms.HiddenInput, initial="1", required=False)
    check_every = forms.IntegerField(min_value=0, max_value=1000, required=False, label="A check every N comparisons",
                                     help_text="about one HIT in N + 1 is a check, never two in a row; 0 = none "
                                               "(needs check lines in the bundle)")
    onboarding_checks = forms.IntegerField(min_value=0, max_value=50, required=False, label="Onboarding checks",
                                           help_text="a worker's first HITs are this many checks; fail them and "
                                                     "they are thanked and not served more")
    repeat_every = forms.IntegerField(min_value=0, max_value=1000, required=False,
                                      label="A repeat every N comparisons",
                                      help_text="repeats a comparison the worker judged, sides swapped "
                                                "(repeat consistency); 0 = none")
    exclude_too_fast = forms.BooleanField(required=False, label="Exclude workers flagged too fast")
    exclude_failed_checks = forms.BooleanField(required=False, label="Exclude workers who fail checks")
    exclude_low_agreement = forms.BooleanField(required=False, label="Exclude workers with low agreement")

ROLE_CHOICES = [("annotator", "Annotator"), ("researcher", "Researcher")]


class MemberAddForm(forms.Form):
    identifier = forms.CharField(max_length=254, label="Username or e-mail")
    role = forms.ChoiceField(choices=ROLE_CHOICES)


class MemberInviteForm(forms.Form):
    username = forms.CharField(max_length=150, help_text="letters, digits and @/./+/-/_")
    email = forms.EmailField(required=False, label="E-mail", help_text="optional; for password resets later")
    role = forms.ChoiceField(choices=ROLE_CHOICES)


class MemberChangeForm(forms.Form):
    """A row's role change or removal; ``user`` is the member's user id."""

    user = forms.IntegerField(widget=forms.HiddenInput)
    role = forms.ChoiceField(choices=ROLE_CHOICES, required=False)


def _numbers(text: str, kind, name: str, *, allow_all: bool = False) -> list:
    """'10, 20' -> [10, 20]; 'all' (budgets) -> None, meaning every comparison."""
    values = []
    for part in (p.strip() for p in text.replace(";", ",").split(",")):
        if not part:
            continue
        if allow_all and part.lower() == "all":
            values.append(None)
            continue
        try:
            values.append(kind(part))
        except ValueError:
            raise forms.ValidationError(f"{name}: {part!r} is not a number") from None
    if not values:
        raise forms.ValidationError(f"give at least one {name}")
    return list(dict.fromkeys(values))


class PlanForm(forms.Form):
    """A plan request (services.planner.plan_job_create): the grid and the assumptions."""

    budgets = forms.CharField(initial="all", help_text="comma-separated numbers of judgements; all = every comparison")
    batches = forms.CharField(label="Batch sizes", initial="10", help_text="judgements per pair and round, comma-separated")
    gammas = forms.CharField(label="γ", initial="0.05", help_text="decision levels, comma-separated")
    throughput = forms.FloatField(min_value=0.001, initial=200, label="Throughput (judgements per hour)")
    policy = forms.ChoiceField(choices=[("paper", "Paper (Algorithm 2)"), ("adaptive", "Adaptive")])
    reps = forms.IntegerField(min_value=1, max_value=5, initial=2, label="Repetitions",
                              help_text="replays per scenario and grid point")
    use_human = forms.BooleanField(required=False, initial=True, label="Use the study's human labels",
                                   help_text="fit the assumptions from them and replay the pairs they label completely; "
                                             "otherwise (or without any) every annotator is simulated from the values below")
    metric_error = forms.FloatField(min_value=0, max_value=0.5, label="Metric error")
    metric_error_low = forms.FloatField(min_value=0, max_value=0.5, label="low")
    metric_error_high = forms.FloatField(min_value=0, max_value=0.5, label="high")
    tie_rate = forms.FloatField(min_value=0, max_value=0.99, label="Human tie rate")
    tie_rate_low = forms.FloatField(min_value=0, max_value=0.99, label="low")
    tie_rate_high = forms.FloatField(min_value=0, max_value=0.99, label="high")
    spread = forms.FloatField(min_value=0, max_value=5, label="Spread of the systems")
    spread_low = forms.FloatField(min_value=0, max_value=5, label="low")
    spread_high = forms.FloatField(min_value=0, max_value=5, label="high")

    ASSUMPTION_ROWS = ("metric_error", "tie_rate", "spread")
    GRID_FIELDS = ("budgets", "batches", "gammas", "throughput", "policy", "reps")

    def __init__(self, *args, ranking: bool = False, **kwargs):
        """``ranking``: the study runs the ranking design, whose grid has the most labels per
        comparison where the all-pairs protocol has a budget, and one policy (adaptive)."""
        super().__init__(*args, **kwargs)
        if ranking:
            self.fields["budgets"].label = "Labels per comparison"
            self.fields["budgets"].help_text = ("comma-separated: the most judgements each comparison of the sort "
                                                "may take (the study's resolution); all = every item of the pair")
            self.fields["policy"].choices = [("adaptive", "Adaptive (the ranking design's)")]

    def clean_budgets(self):
        values = _numbers(self.cleaned_data["budgets"], int, "budget", allow_all=True)
        if any(v is not None and v < 1 for v in values):
            raise forms.ValidationError("budgets must be positive")
        return values

    def clean_batches(self):
        values = _numbers(self.cleaned_data["batches"], int, "batch size")
        if any(v < 1 for v in values):
            raise forms.ValidationError("batch sizes must be positive")
        return values

    def clean_gammas(self):
        values = _numbers(self.cleaned_data["gammas"], float, "γ")
        if any(not 0 < v < 1 for v in values):
            raise forms.ValidationError("γ must lie strictly between 0 and 1")
        return values

    def clean(self):
        data = super().clean()
        for name in self.ASSUMPTION_ROWS:
            low, value, high = (data.get(f"{name}_low"), data.get(name), data.get(f"{name}_high"))
            if None not in (low, value, high) and not low <= value <= high:
                self.add_error(name, f"must lie between its low ({low}) and high ({high})")
        return data

    def assumptions(self) -> dict:
        data = self.cleaned_data
        return {**{name: data[name] for name in self.ASSUMPTION_ROWS},
                **{f"{name}_range": [data[f"{name}_low"], data[f"{name}_high"]] for name in self.ASSUMPTION_ROWS}}

    def assumption_rows(self):
        """(label, value field, low field, high field) per assumption, for the template."""
        return [(self[name].label, self[name], self[f"{name}_low"], self[f"{name}_high"]) for name in self.ASSUMPTION_ROWS]
