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

from django.utils.text import capfirst

from protocol.designs import PairDesign
from protocol.designs.all_pairs import ALL_PAIRS
from protocol.plan import MAX_KIND_SD, MAX_KINDS, RANGED_NAMES
from protocol.study_settings import (BOOL, CHOICE, DRAFT, INT, METRIC, RUNNING, SETTINGS, TEXT, Setting,
                                     cross_problems, settings_for)

from .guarantees import PAPER_POLICY_WARNING
from .models import SettingBounds, Study


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    """Several files in one field (Django's documented pattern)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("widget", MultipleFileInput())
        super().__init__(*args, **kwargs)

    def clean(self, data, initial=None):
        single = super().clean
        return [single(d, initial) for d in data] if isinstance(data, (list, tuple)) else [single(data, initial)]


class StudyUploadForm(forms.Form):
    """The upload's first step: the files (validated at once) and the study's address."""

    bundle = MultipleFileField(label="Files", help_text=(
        "A study bundle (.jsonl, .jsonl.gz); or your answers as a table (CSV, TSV, JSON Lines, JSON, Parquet: "
        "a row per prompt and model; a Hugging Face dataset saved with save_to_disk: its folder's files), "
        "AlpacaEval outputs (one file per model), or MT-Bench question and answer files. Several files: choose "
        "them together."))
    slug = forms.SlugField(required=False, help_text="URL name; default: from the study's name")


class StudyColumnsForm(forms.Form):
    """The upload's column step for files that are no bundle (protocol/tables.py): which column
    plays which role, the metric columns, the metrics to compute at import, the study's name
    and text format. ``columns``: the first file's columns; ``detected``: their detected roles."""

    ROLES = (("prompt", "Prompt (the input)"), ("model", "Model (the system)"), ("response", "Response"),
             ("id", "Item id (optional)"), ("reference", "Reference (optional)"), ("sample", "Sample (optional)"),
             ("prompt_kind", "Kind of prompt (optional: the active design fits by kind)"),
             ("messages", "Whole chats (optional: instead of prompt and response)"))

    staged_files = forms.CharField(widget=forms.HiddenInput)
    name = forms.CharField(max_length=200, help_text="the study's name")
    text_format = forms.ChoiceField(choices=[("", "as the answers look"), ("markdown", "markdown"),
                                             ("plain", "plain text")], required=False, label="Show texts as")
    metrics = forms.MultipleChoiceField(required=False, widget=forms.CheckboxSelectMultiple,
                                        label="Columns of metric scores")
    compute = forms.MultipleChoiceField(required=False, widget=forms.CheckboxSelectMultiple,
                                        label="Metrics to compute", choices=[
                                            ("chrf", "chrF against the reference"),
                                            ("bleu", "BLEU against the reference"),
                                            ("rouge_l", "ROUGE-L against the reference"),
                                            ("length", "answer length in words (a baseline)")])

    def __init__(self, *args, columns: list[str] = (), detected: dict | None = None, table: bool = True, **kwargs):
        detected = detected or {}
        initial = kwargs.setdefault("initial", {})
        for role, _ in self.ROLES:
            initial.setdefault(role, next((c for c, r in detected.items() if r == role), ""))
        initial.setdefault("metrics", [c for c, r in detected.items() if r == "metric"])
        super().__init__(*args, **kwargs)
        if table:
            for role, label in self.ROLES:
                self.fields[role] = forms.ChoiceField(label=label, required=False,
                                                      choices=[("", "—")] + [(c, c) for c in columns])
            self.fields["metrics"].choices = [(c, c) for c in columns]
        else:  # FastChat / MT-Bench files: their layout is known
            del self.fields["metrics"]
        self.order_fields([role for role, _ in self.ROLES] + ["metrics", "compute", "name", "text_format"])

    def mapping(self) -> dict:
        """The column mapping for protocol.tables (every role given explicitly)."""
        if "metrics" not in self.fields:
            return {}
        mapping = {role: self.cleaned_data.get(role) or "" for role, _ in self.ROLES}
        mapping["metrics"] = list(self.cleaned_data.get("metrics") or [])
        return mapping


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
        """The metric's name for services.studies.study_import; "" for a human-only study."""
        value = self.cleaned_data["metric"]
        return "" if value == HUMAN_ONLY else value.removeprefix(METRIC_PREFIX)


def setting_formfield(setting: Setting, *, required: bool) -> forms.Field:
    """The form field of a study setting (protocol/study_settings.py): its label, help and
    widget; its bounds are checked by the setting's own check (SettingBounds), whose message
    names the setting and the bounds."""
    common = {"label": capfirst(setting.label), "help_text": setting.explained, "validators": [SettingBounds(setting.name)]}
    if setting.kind == BOOL:
        return forms.BooleanField(required=False, **common)
    if setting.kind == CHOICE:
        return forms.ChoiceField(choices=setting.field_choices, required=required, **common,
                                 error_messages={"invalid_choice": setting.refusal('"%(value)s"')})
    if setting.kind == TEXT:
        widget = forms.Textarea(attrs={"rows": 6}) if setting.max_length > 200 else forms.TextInput
        field = forms.CharField(required=required and not setting.blank, widget=widget, **common)
        field.widget.attrs["maxlength"] = str(setting.max_length)
        return field
    attrs = {"min": setting.minimum} if not setting.min_exclusive else {}
    attrs.update({"max": setting.maximum} if not setting.max_exclusive else {})
    kind = forms.IntegerField if setting.kind == INT else forms.FloatField
    field = kind(required=required, **common)
    field.widget.attrs.update({key: str(value) for key, value in attrs.items()})
    return field


class SettingsForm(forms.Form):
    """A form of study settings built from their table (protocol/study_settings.py): those of
    ``surface`` (and ``group``). ``study`` gives the initial values.

    ``keep_empty``: a field left empty (or out) keeps the study's value, so the form works
    without that part; otherwise an empty optional setting takes its default. ``marker``: the
    name of a hidden field without which the form changes nothing (a fieldset of booleans,
    whose unticked boxes are not sent)."""

    surface = RUNNING
    group: str | None = None
    keep_empty = False
    marker: str | None = None

    def __init__(self, *args, study: Study | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.settings = [s for s in settings_for(self.surface, group=self.group) if s.kind != METRIC]
        for setting in self.settings:
            self.fields[setting.name] = setting_formfield(setting, required=not (self.keep_empty or setting.optional))
        if self.marker:
            self.fields[self.marker] = forms.CharField(widget=forms.HiddenInput, initial="1", required=False)
        if study is not None:
            self.initial = {**{s.name: getattr(study, s.name) for s in self.settings}, **self.initial}

    def clean(self):
        data = super().clean()
        given = {name: value for name, value in data.items() if value is not None}
        for name, problem in cross_problems(given).items():
            if name in self.fields and name in given:
                self.add_error(name, problem)
        return data

    def changes(self) -> dict:
        """The settings this form sets: name -> value."""
        if self.marker and not self.cleaned_data.get(self.marker):
            return {}
        changes = {}
        for setting in self.settings:
            value = self.cleaned_data.get(setting.name)
            if value is None and self.keep_empty:
                continue
            changes[setting.name] = setting.default if value is None else value
        return changes


class StudySettingsForm(SettingsForm):
    """What a researcher may change while a study runs (services.studies.study_settings_update)."""

    group = "run"


class StudyCrowdSettingsForm(SettingsForm):
    """A crowd worker's session (docs/crowd.md); shown on the settings page under the above. A
    field left out keeps the study's value (the settings form without this part still works)."""

    group = "crowd"
    keep_empty = True


class StudyQualitySettingsForm(SettingsForm):
    """Checks and exclusion rules (docs/quality.md); on the settings page. Applied only when the
    page's quality fieldset was sent (``quality_form``), so other forms leave them alone."""

    group = "quality"
    keep_empty = True
    marker = "quality_form"


# The running study's settings page: its forms by the name the template knows them by.
RUNNING_FORMS = {"form": StudySettingsForm, "crowd": StudyCrowdSettingsForm, "quality": StudyQualitySettingsForm}


def running_settings_forms(study: Study, data=None) -> dict[str, SettingsForm]:
    """The forms of a running study's settings page (bound to ``data`` when given)."""
    return {name: form(data, study=study) for name, form in RUNNING_FORMS.items()}


class StudyDraftForm(SettingsForm):
    """A draft's protocol parameters (services.studies.study_draft_update); ``metrics``: the study's own
    metric names. Once launched they are fixed (Study.PROTOCOL_PARAMETERS)."""

    surface = DRAFT
    metric = forms.ChoiceField(label="Metric for the protocol")

    def __init__(self, *args, metrics: list[str], **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["metric"].choices = [(METRIC_PREFIX + m, m) for m in metrics] + [
            (HUMAN_ONLY, "No metric: human-only study")]
        # the paper's policy is offered with its measured false-decision rate (guarantees.py)
        policy = self.fields["allocation_policy"]
        policy.choices = [(value, f"{label} — {PAPER_POLICY_WARNING}" if value == Study.Allocation.PAPER else label)
                          for value, label in policy.choices]

    def chosen_metric(self) -> str:
        """The metric's name; "" for a human-only study."""
        value = self.cleaned_data["metric"]
        return "" if value == HUMAN_ONLY else value.removeprefix(METRIC_PREFIX)

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
    futilities = forms.CharField(label="Futility levels", required=False, help_text=(
        "comma-separated, 0 to 0.5 (empty: the study's): higher gives hard pairs up sooner, fewer judgements and "
        "fewer pairs decided; lower spends more on them. Side by side they show what the study's metric buys: "
        "labels or correctness"))
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
    # the kinds of prompt (protocol.plan's kinds and kind_sd, the arena's prompt_types and type_sd)
    # optional (empty: none), so that a plan request of before them still means the same
    kinds = forms.IntegerField(min_value=0, max_value=MAX_KINDS, initial=0, required=False, label="Kinds of prompt",
                               help_text="how many kinds the prompts fall into, systems strong on some and weak on "
                                         "others (0: the prompts do not differ so); a study whose items carry a "
                                         "kind has its own number, and the active design is told them")
    kind_sd = forms.FloatField(min_value=0, max_value=MAX_KIND_SD, initial=0, required=False, label="Effect of a kind")
    kind_sd_low = forms.FloatField(min_value=0, max_value=MAX_KIND_SD, initial=0, required=False, label="low")
    kind_sd_high = forms.FloatField(min_value=0, max_value=MAX_KIND_SD, initial=0, required=False, label="high")

    # protocol.plan's assumptions with a range (RANGED_NAMES), a row each
    ASSUMPTION_ROWS = RANGED_NAMES
    GRID_FIELDS = ("budgets", "batches", "gammas", "futilities", "throughput", "policy", "reps")

    def __init__(self, *args, design: PairDesign = ALL_PAIRS, **kwargs):
        """``design``: the study's pair design (protocol.designs). One that caps the labels per
        comparison in its replay has them in its grid where the all-pairs protocol has a budget;
        one that the planner replays with one policy offers that policy alone."""
        super().__init__(*args, **kwargs)
        if design.plan_per_comparison:
            self.fields["budgets"].label = "Labels per comparison"
            self.fields["budgets"].help_text = ("comma-separated: the most judgements each comparison of the sort "
                                                "may take (the study's resolution); all = every item of the pair")
        if design.plan_replay != "all_pairs":  # its replay runs its own futility level
            del self.fields["futilities"]
        if design.plan_policy:
            policy = self.fields["policy"]
            policy.choices = [(value, f"{label} (the {design.title} design's)") for value, label in policy.choices
                              if value == design.plan_policy]

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

    def clean_futilities(self):
        """None when left empty (the study's level); else the levels, each within the setting's bounds."""
        if not self.cleaned_data["futilities"].strip():
            return None
        values = _numbers(self.cleaned_data["futilities"], float, "futility level")
        problem = next(filter(None, (SETTINGS["futility"].problem(v, "a futility level") for v in values)), None)
        if problem:
            raise forms.ValidationError(problem)
        return values

    def clean_gammas(self):
        values = _numbers(self.cleaned_data["gammas"], float, "γ")
        if any(not 0 < v < 1 for v in values):
            raise forms.ValidationError("γ must lie strictly between 0 and 1")
        return values

    def clean(self):
        data = super().clean()
        # empty: no kinds of prompt; an effect without its range: the effect alone
        for name, empty in (("kinds", 0), ("kind_sd", 0.0), ("kind_sd_low", data.get("kind_sd")),
                            ("kind_sd_high", data.get("kind_sd"))):
            if name not in self.errors and data.get(name) is None:
                data[name] = empty if empty is not None else 0.0
        for name in self.ASSUMPTION_ROWS:
            low, value, high = (data.get(f"{name}_low"), data.get(name), data.get(f"{name}_high"))
            if None not in (low, value, high) and not low <= value <= high:
                self.add_error(name, f"must lie between its low ({low}) and high ({high})")
        return data

    def assumptions(self) -> dict:
        data = self.cleaned_data
        return {**{name: data[name] for name in self.ASSUMPTION_ROWS}, "kinds": data["kinds"],
                **{f"{name}_range": [data[f"{name}_low"], data[f"{name}_high"]] for name in self.ASSUMPTION_ROWS}}

    def assumption_rows(self):
        """(label, value field, low field, high field) per assumption, for the template."""
        return [(self[name].label, self[name], self[f"{name}_low"], self[f"{name}_high"]) for name in self.ASSUMPTION_ROWS]
