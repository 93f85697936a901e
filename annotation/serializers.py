"""DRF serializers: shapes of the API's input and output, no logic."""
from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from rest_framework import serializers

from protocol.computed_metrics import COMPUTABLE
from protocol.tables import ROLES as TABLE_ROLES
from protocol.study_settings import (API, API_IMPORT, BOOL, CHOICE, FLOAT, INT, KINDS_CLOSE_BAR_FACTOR, METRIC,
                                     ORDER_BAR_FACTOR, SETTINGS, TEXT, Setting, settings_for)

from .guarantees import PAPER_POLICY_WARNING
from .models import SettingBounds, Study


# JSON bodies are typed: DRF's fields would take "5", 5.0 and true for an integer, 5 for a
# string and "yes" for a boolean, so a schema-violating body passed. These take only the JSON
# type the schema names (multipart forms, all strings, keep DRF's fields).
class StrictIntegerField(serializers.IntegerField):
    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictFloatField(serializers.FloatField):
    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, (int, float)):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictCharField(serializers.CharField):
    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictBooleanField(serializers.BooleanField):
    def to_internal_value(self, data):
        if not isinstance(data, bool):
            self.fail("invalid", input=data)
        return data


class StrictChoiceField(serializers.ChoiceField):
    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid_choice", input=data)
        return super().to_internal_value(data)


# A serializer field per kind of study setting: JSON bodies (strict) and multipart forms.
FIELD_CLASSES = {
    True: {INT: StrictIntegerField, FLOAT: StrictFloatField, TEXT: StrictCharField, BOOL: StrictBooleanField,
           CHOICE: StrictChoiceField},
    False: {INT: serializers.IntegerField, FLOAT: serializers.FloatField, TEXT: serializers.CharField,
            BOOL: serializers.BooleanField, CHOICE: serializers.ChoiceField},
}


def setting_field(setting: Setting, *, strict: bool, help_text: str | None = None, **kwargs) -> serializers.Field:
    """The serializer field of a study setting (protocol/study_settings.py): its bounds are the
    setting's own check (SettingBounds, whose message names the setting and its bounds), and the
    schema says them (SettingBoundsSchema)."""
    kwargs.update(help_text=setting.explained if help_text is None else help_text,
                  validators=[SettingBounds(setting.name)])
    if setting.kind == CHOICE:
        kwargs.update(choices=setting.choices, error_messages={"invalid_choice": setting.refusal('"{input}"')})
    if setting.kind == TEXT:
        kwargs.update(allow_blank=setting.blank)
    return FIELD_CLASSES[strict][setting.kind](**kwargs)


class SettingBoundsSchema(OpenApiSerializerFieldExtension):
    """OpenAPI: a study setting's field states its bounds (inclusive or exclusive) and length."""

    target_class = "rest_framework.fields.Field"
    match_subclasses = True

    @classmethod
    def _matches(cls, target) -> bool:
        return any(isinstance(v, SettingBounds) for v in getattr(target, "validators", ()))

    def map_serializer_field(self, auto_schema, direction):
        schema = auto_schema._map_serializer_field(self.target, direction, bypass_extensions=True)
        setting = SETTINGS[next(v.name for v in self.target.validators if isinstance(v, SettingBounds))]
        if setting.kind in (INT, FLOAT):
            schema.update(minimum=setting.minimum, maximum=setting.maximum)
            schema.update({"exclusiveMinimum": True} if setting.min_exclusive else {})
            schema.update({"exclusiveMaximum": True} if setting.max_exclusive else {})
        if setting.kind == TEXT:
            schema["maxLength"] = setting.max_length
        return schema


class StudySerializer(serializers.ModelSerializer):
    metric = serializers.CharField(source="metric.name", default=None, read_only=True)
    guarantee = serializers.CharField(read_only=True, help_text="what a ± decision guarantees under the study's rule")
    family_guarantee = serializers.CharField(read_only=True,
                                             help_text="what holds across the study's pairs; empty: nothing claimed")
    policy_warning = serializers.CharField(read_only=True, help_text="the paper policy's measured false-decision "
                                                                     "rate when the study uses it; else empty")

    class Meta:
        model = Study
        # the protocol parameters (Study.PROTOCOL_PARAMETERS) with the status, budget and item choice
        fields = ["slug", "name", "criterion", "status", "budget", *Study.PROTOCOL_PARAMETERS, "ranking_order",
                  "guarantee", "family_guarantee", "policy_warning", "item_choice", "separability_status",
                  "created_at"]


# Settings the API's import takes (the metric, a choice among the bundle's, is its own field).
IMPORT_SETTINGS = tuple(s for s in settings_for(API_IMPORT) if s.kind != METRIC)
IMPORT_NOTES = {Study.Allocation.PAPER: PAPER_POLICY_WARNING}


def _import_help(setting: Setting) -> str:
    notes = " ".join(IMPORT_NOTES[value] for value in setting.values if value in IMPORT_NOTES)
    return f"{setting.explained}; default: the bundle's setting, else {setting.default}" + (
        f". {notes}" if notes else "")


_ROLE = "(?:" + "|".join((*TABLE_ROLES, "metrics", "ignore")) + ")"
COLUMNS_PATTERN = rf"^(?:\s*{_ROLE}\s*=[^,=]*(?:,\s*{_ROLE}\s*=[^,=]*)*)?$"  # protocol.tables.parse_columns


class StudyImportSerializer(serializers.Serializer):
    bundle = serializers.FileField(help_text="a study bundle; or the first of the files a researcher has "
                                             "(a table: CSV, TSV, JSON Lines, JSON, Parquet; AlpacaEval outputs; "
                                             "an MT-Bench question file): docs/bundle-format.md, 'Files as you have them'")
    files = serializers.ListField(child=serializers.FileField(), required=False,
                                  help_text="more files read with the first: another model's AlpacaEval outputs, "
                                            "MT-Bench answer files, tables with the same columns")
    columns = serializers.RegexField(COLUMNS_PATTERN, required=False, allow_blank=True, max_length=2000,
                                     help_text="a table's column roles when their names do not give them: "
                                               "prompt=question,model=generator,response=answer,metrics=a+b,ignore=c")
    compute = serializers.MultipleChoiceField(choices=COMPUTABLE, required=False,
                                              help_text="metrics to compute at import: chrf, bleu, rouge_l "
                                                        "(against the reference column), length")
    name = serializers.CharField(required=False, allow_blank=True, max_length=200,
                                 help_text="a table's study name (default: the first file's name)")
    text_format = serializers.ChoiceField(choices=["plain", "markdown"], required=False,
                                          help_text="how a table's texts are shown (default: markdown when the "
                                                    "answers look like it)")
    slug = serializers.SlugField(required=False, allow_blank=True)
    metric = serializers.CharField(required=False, allow_blank=True,
                                   help_text="the protocol's metric; default: the bundle's setting")
    human_only = serializers.BooleanField(
        required=False, default=False,
        help_text="no metric: the protocol decides from human judgements only. A bundle that has "
                  "metrics but names none is refused unless a metric or this is given")

    def get_fields(self):
        # the settings chosen at import, over the bundle's own (multipart: DRF's lenient fields)
        return {**super().get_fields(), **{s.name: setting_field(s, strict=False, required=False,
                                                                   help_text=_import_help(s))
                                          for s in IMPORT_SETTINGS}}


class PairSerializer(serializers.Serializer):
    first = serializers.CharField()
    second = serializers.CharField()
    status = serializers.CharField()
    decision = serializers.IntegerField()
    theta = serializers.FloatField(allow_null=True)
    round = serializers.IntegerField()
    judgements = serializers.IntegerField()
    capacity = serializers.IntegerField()
    favi = serializers.FloatField(allow_null=True)
    fragility = serializers.IntegerField(allow_null=True, help_text="decided pairs: the least number of counted "
                                         "judgements whose removal would undo the decision (null: undecided)")
    fragility_share = serializers.FloatField(allow_null=True, help_text="fragility / the pair's counted judgements")
    fragile = serializers.BooleanField(help_text="the removal of at most 0.5 % of its judgements undoes the decision")
    fragility_exact = serializers.BooleanField(allow_null=True, help_text="false: an upper bound (items with "
                                               "several judgements)")
    fragility_sign = serializers.IntegerField(allow_null=True, help_text="removals that undo the sign of the "
                                              "human margin (exact)")
    fragility_evidence = serializers.IntegerField(allow_null=True, help_text="removals that take the e-process's "
                                                  "wealth below its bar (null: not computed or out of reach)")


class HitSerializer(serializers.Serializer):
    """What an annotator sees, and nothing more: no item id, so a gold check or a repeated
    comparison looks like any other HIT."""

    id = serializers.IntegerField(source="assignment.pk")
    input = serializers.CharField(source="item.input")
    left = serializers.CharField()
    right = serializers.CharField()
    # A chat study's texts as the conversations they are ([{"role", "content"}, ...]); null for a
    # plain text (``input``, ``left`` and ``right`` are then all there is).
    input_messages = serializers.ListField(child=serializers.DictField(child=serializers.CharField()),
                                           source="item.input_messages", allow_null=True, default=None)
    left_messages = serializers.ListField(child=serializers.DictField(child=serializers.CharField()),
                                          allow_null=True, default=None)
    right_messages = serializers.ListField(child=serializers.DictField(child=serializers.CharField()),
                                           allow_null=True, default=None)
    expires_at = serializers.DateTimeField(source="assignment.expires_at")
    criteria = serializers.ListField(
        child=serializers.DictField(), required=False,
        help_text="a rubric study's criteria (name, label, reason off/optional/required, scale of "
                  "{value, text}); empty: answer left / tie / right")


class CriterionAnswerSerializer(serializers.Serializer):
    value = serializers.IntegerField(help_text="as shown: + = left better; one of the values of its criterion's "
                                               "scale (the HIT's criteria list them: -1..1, -2..2 with strength)")
    reason = serializers.CharField(required=False, allow_blank=True, max_length=1000)


class SubmitSerializer(serializers.Serializer):
    answer = StrictChoiceField(choices=["left", "tie", "right"], required=False,
                               help_text="a one-criterion study's answer (a rubric study: 409, it takes answers)")
    answers = serializers.DictField(child=CriterionAnswerSerializer(), required=False,
                                    help_text="a rubric study's answers: criterion -> {value, reason} (a one-criterion study: 409)")
    seconds_on_task = StrictFloatField(required=False, min_value=0, max_value=86400)
    read_seconds = StrictFloatField(required=False, min_value=0, max_value=86400,
                                    help_text="time from the texts shown to the first answer chosen")


class BudgetSerializer(serializers.Serializer):
    total = serializers.IntegerField()
    spent = serializers.IntegerField(help_text="live judgements")
    imported = serializers.IntegerField(help_text="judgements imported with the study")
    reserved = serializers.IntegerField(help_text="asked for in open rounds")
    left = serializers.IntegerField()


class StudyDetailSerializer(StudySerializer):
    budget = BudgetSerializer()
    statuses = serializers.DictField(child=serializers.IntegerField(), help_text="pair status -> pairs")
    favi_summary = serializers.JSONField(allow_null=True)
    spa = serializers.JSONField(allow_null=True)
    judges = serializers.ListField(child=serializers.DictField(), help_text=(
        "per preference metric and judge: verdicts, ordered, decisive, first_position_share, both_orders, "
        "flip_rate, human_compared, human_agreement (protocol.judges.JudgeStats); criterion: in a rubric study, "
        "the criterion whose human answers it is compared with"))
    pair_count = serializers.IntegerField(help_text="the study's system pairs")
    pairs_url = serializers.URLField(help_text="every pair's state, paged (study_pairs)")

    class Meta(StudySerializer.Meta):
        fields = StudySerializer.Meta.fields + ["budget", "statuses", "favi_summary", "spa", "judges", "pair_count",
                                                "pairs_url"]


class StudySettingsSerializer(serializers.Serializer):
    """What a researcher may change while a study runs (the settings of the table the API may
    set); a PATCH sends only what changes."""

    def get_fields(self):
        return {s.name: setting_field(s, strict=True) for s in settings_for(API)}


class DecisionSerializer(PairSerializer):
    quota = serializers.IntegerField(help_text="judgements asked for in the open round")
    agreement = serializers.FloatField(allow_null=True, help_text="metric-human sample agreement")


class OrderClaimSerializer(serializers.Serializer):
    """A neighbour of the active design's fitted order (docs/leaderboard.md, the fragility of the
    order's claims)."""

    upper = serializers.CharField(help_text="the system placed above")
    lower = serializers.CharField(help_text="the system placed just below it")
    status = serializers.CharField(help_text="ordered (misorder <= bar), close (misorder_beyond <= bar), open or "
                                   "spent (docs/ranking.md)")
    bar = serializers.FloatField(allow_null=True, help_text="the posterior bound the claim is made at, from the "
                                 f"study's confidence: (1 - confidence) / {ORDER_BAR_FACTOR} for an ordered claim "
                                 "(stricter than the confidence it is stated at), 1 - confidence for a close one; "
                                 "null: no claim")
    misorder = serializers.FloatField(help_text="posterior probability that the two are the other way round")
    misorder_beyond = serializers.FloatField(help_text="... the other way round by more than the resolution; "
                                             "fitted by kind of prompt, with the part of the uncertainty the kinds "
                                             f"add taken at the tail (1 - confidence) / {KINDS_CLOSE_BAR_FACTOR} "
                                             "(at least the posterior probability)")
    removals = serializers.IntegerField(allow_null=True, help_text="about how many counted judgements, removed, "
                                        "undo the claim (an upper bound; null: not a claim, or the ranking is not "
                                        "complete yet)")
    fragile = serializers.BooleanField(help_text="removing at most 0.5 % of the judgements undoes the claim")


class TopClaimSerializer(serializers.Serializer):
    """"The first k of the active design's fitted order are above the rest", at a tier's end."""

    k = serializers.IntegerField()
    top = serializers.ListField(child=serializers.CharField(), help_text="the first k systems, best first")
    statistic = serializers.FloatField(help_text="the least (difference) / sd over a system of the first k and one "
                                       "of the rest")
    weakest = serializers.ListField(child=serializers.CharField(), help_text="that pair, [above, below]")
    removals = serializers.IntegerField(allow_null=True, help_text="about how many counted judgements, removed, "
                                        "take some pair of the claim below the bar (an upper bound; null: not every "
                                        "pair is at the bar)")
    undone_by = serializers.ListField(child=serializers.CharField(), allow_null=True,
                                      help_text="the pair those removals undo")
    fragile = serializers.BooleanField(help_text="removing at most 0.5 % of the judgements undoes the claim")


class DecisionListSerializer(serializers.Serializer):
    rule = serializers.CharField(help_text="the decision rule the decisions were made with")
    guarantee = serializers.CharField(help_text="what a ± decision guarantees under that rule")
    family_guarantee = serializers.CharField(allow_blank=True,
                                             help_text="what holds across the study's pairs; empty: nothing claimed")
    policy_warning = serializers.CharField(allow_blank=True, help_text="the paper policy's measured false-decision "
                                                                       "rate when the study uses it; else empty")
    systems = serializers.ListField(child=serializers.CharField())
    budget = BudgetSerializer()
    statuses = serializers.DictField(child=serializers.IntegerField())
    count = serializers.IntegerField(help_text="the study's pairs, on every page")
    next = serializers.URLField(allow_null=True, help_text="the next page of pairs; null on the last")
    previous = serializers.URLField(allow_null=True, help_text="the previous page of pairs; null on the first")
    pairs = DecisionSerializer(many=True, help_text="a page of the pairs (page, page_size)")
    order_claims = OrderClaimSerializer(many=True, help_text="the active design's fitted order: each neighbour "
                                        "claim and what it rests on ([] for the other designs)")
    top_claims = TopClaimSerializer(many=True, help_text="the active design's top-k claims at its tiers' ends, "
                                    "once the ranking is complete ([] otherwise)")


class JudgementSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    item = serializers.CharField(source="comparison.item.external_id")
    first = serializers.CharField(source="comparison.first.name")
    second = serializers.CharField(source="comparison.second.name")
    value = serializers.IntegerField(help_text="+1 first better, 0 tie, -1 second better")
    annotator = serializers.CharField(source="annotator.external_id")
    platform = serializers.CharField(source="annotator.platform")
    source = serializers.CharField()
    shown_swapped = serializers.BooleanField(source="assignment.shown_swapped", default=None, allow_null=True)
    seconds_on_task = serializers.FloatField(allow_null=True, help_text="the client's claim")
    server_seconds = serializers.FloatField(allow_null=True, help_text="measured by the server, render to answer")
    kind = serializers.ChoiceField(choices=["real", "check", "repeat"],
                                   help_text="only real judgements are counted by the protocol")
    excluded = serializers.BooleanField(help_text="by a worker excluded from the study: not counted")
    created_at = serializers.DateTimeField()
    answers = serializers.JSONField(allow_null=True, help_text="a rubric study's answers, canonical order: "
                                    "criterion -> {value, strength, reason}")
    read_seconds = serializers.FloatField(allow_null=True, help_text="browser-measured: texts shown to first answer")


class ReportPairSerializer(serializers.Serializer):
    first = serializers.CharField()
    second = serializers.CharField()
    confusion = serializers.ListField(child=serializers.ListField(child=serializers.IntegerField()),
                                      help_text="3x3, human rows x metric columns, order (+, =, -)")
    favi = serializers.FloatField(allow_null=True)
    human_decision = serializers.IntegerField()
    metric_decision = serializers.IntegerField()
    category = serializers.CharField()


class MetricReportSerializer(serializers.Serializer):
    metric = serializers.CharField()
    systems = serializers.ListField(child=serializers.CharField())
    pairs = ReportPairSerializer(many=True)
    sample_accuracy = serializers.FloatField(allow_null=True)
    system_accuracy = serializers.FloatField(allow_null=True)
    mean_abs_favi = serializers.FloatField(allow_null=True)
    spa = serializers.FloatField(allow_null=True)
    pa = serializers.FloatField(allow_null=True)


class MemberSerializer(serializers.Serializer):
    username = serializers.CharField(source="user.username")
    role = serializers.ChoiceField(choices=["researcher", "annotator"])


class MemberAddSerializer(serializers.Serializer):
    username = StrictCharField(max_length=150)
    role = StrictChoiceField(choices=["researcher", "annotator"])


class SubmitResultSerializer(serializers.Serializer):
    judgement = serializers.IntegerField()
    value = serializers.IntegerField(help_text="stored in canonical order: +1 = first system better")


class JudgementFilterSerializer(serializers.Serializer):
    first = serializers.CharField(required=False, max_length=200)
    second = serializers.CharField(required=False, max_length=200)
    annotator = serializers.CharField(required=False, max_length=200)
    platform = serializers.ChoiceField(required=False, choices=["local", "prolific", "mturk", "import"])


class LeaderboardEntrySerializer(serializers.Serializer):
    rank = serializers.IntegerField(help_text="1 = beaten by no system; equal ranks are not separated yet")
    system = serializers.CharField()
    wins = serializers.IntegerField(help_text="pairs decided in this system's favour")
    losses = serializers.IntegerField()
    undecided = serializers.IntegerField(help_text="pairs with no decision yet")


class StyleRatingSerializer(serializers.Serializer):
    position = serializers.IntegerField(help_text="1 = highest style-controlled rating")
    system = serializers.CharField()
    rating = serializers.FloatField(help_text="Arena scale: 1000 + 400 / ln 10 × log-strength (1000 = the average "
                                              "system, 400 points = odds of 10 : 1)")
    low = serializers.FloatField(help_text="lower end of the sandwich interval (clustered by prompt)")
    high = serializers.FloatField()
    se = serializers.FloatField(help_text="standard error, rating points")
    votes = serializers.IntegerField(help_text="counted human judgements the system took part in")
    plain_position = serializers.IntegerField(allow_null=True, help_text="place on the plain leaderboard")
    moved = serializers.IntegerField(allow_null=True, help_text="plain place minus this place (> 0: higher here)")


class StyleEffectSerializer(serializers.Serializer):
    feature = serializers.ChoiceField(choices=["words", "headers", "list_items", "bold", "position"],
                                      help_text="first answer minus second (words, markdown headers, list items, "
                                                "bold spans), or the side shown (+1 left, -1 right, 0 unknown)")
    label = serializers.CharField()
    unit = serializers.CharField(help_text="the amount the effect is stated per, e.g. 100 more words")
    log_odds = serializers.FloatField(help_text="change in the log-odds of winning per unit")
    low = serializers.FloatField()
    high = serializers.FloatField()
    points = serializers.FloatField(help_text="the same in rating points")
    points_low = serializers.FloatField()
    points_high = serializers.FloatField()
    chance = serializers.FloatField(help_text="chance that the answer with one more unit wins between equally "
                                              "strong systems (0.5 = no effect)")
    chance_low = serializers.FloatField()
    chance_high = serializers.FloatField()
    coef = serializers.FloatField(help_text="effect per standard deviation of the covariate (arena-rank's coeffs)")
    measured = serializers.BooleanField(help_text="false when the covariate never varies in these judgements")
    clear = serializers.BooleanField(help_text="its interval excludes no effect")
    sentence = serializers.CharField()


class StyleLeaderboardSerializer(serializers.Serializer):
    available = serializers.BooleanField()
    reason = serializers.CharField(required=False, help_text="why there is no fit yet (available false)")
    votes = serializers.IntegerField(help_text="counted human judgements")
    prompts = serializers.IntegerField(required=False, help_text="prompts judged: the sandwich's clusters")
    level = serializers.FloatField()
    penalty = serializers.FloatField(required=False, help_text="L2 penalty on the standardised effects (1 / votes)")
    features = serializers.ListField(child=serializers.CharField())
    rows = StyleRatingSerializer(many=True, required=False)
    effects = StyleEffectSerializer(many=True, required=False)


class AnnotatorQualitySerializer(serializers.Serializer):
    annotator_id = serializers.IntegerField(help_text="use in the exclusion endpoint")
    annotator = serializers.CharField(help_text="the platform worker id")
    platform = serializers.CharField()
    judgements = serializers.IntegerField(help_text="every answer, checks and repeats included")
    checks = serializers.IntegerField()
    median_seconds = serializers.FloatField(allow_null=True, help_text="render to answer, server-measured")
    tie_rate = serializers.FloatField()
    left_share = serializers.FloatField(allow_null=True, help_text="left / (left + right) as shown; 0.5 = no bias")
    agreement = serializers.FloatField(allow_null=True, help_text="leave-one-out agreement with the other annotators")
    overlap = serializers.IntegerField(help_text="comparisons shared with other annotators")
    gold_accuracy = serializers.FloatField(allow_null=True)
    repeats = serializers.IntegerField()
    repeat_consistency = serializers.FloatField(allow_null=True)
    flags = serializers.ListField(child=serializers.ChoiceField(
        choices=["too_fast", "straight_lining", "failed_checks", "low_agreement", "inconsistent"]))
    excluded = serializers.BooleanField()


class ExclusionSerializer(serializers.Serializer):
    excluded = StrictBooleanField(help_text="true: exclude the worker; false: re-include them")
    reason = StrictCharField(required=False, allow_blank=True, max_length=500, default="")


class ExclusionResultSerializer(serializers.Serializer):
    annotator_id = serializers.IntegerField()
    excluded = serializers.BooleanField()
    changed = serializers.BooleanField(help_text="false when the worker already was in that state")


class JudgeStatsSerializer(serializers.Serializer):
    """One judge (a preference metric and the judge its verdicts name) against the humans
    (protocol.judges.JudgeStats; docs/judges.md)."""
    metric = serializers.CharField()
    judge = serializers.CharField(help_text="the judge model its verdicts name ('' when unknown)")
    criterion = serializers.CharField(help_text="a rubric study's criterion the judge is compared on; '' otherwise")
    verdicts = serializers.IntegerField()
    unparsed = serializers.IntegerField(help_text="a judge run's answers that named no verdict (not ties)")
    ordered = serializers.IntegerField(help_text="verdicts with a known presentation order")
    decisive = serializers.IntegerField(help_text="ordered verdicts that are not a tie")
    first_position_share = serializers.FloatField(allow_null=True, help_text=(
        "of the decisive verdicts, the share won by the output shown first (0.5 = no position bias)"))
    both_orders = serializers.IntegerField(help_text="comparisons judged in both orders")
    flip_rate = serializers.FloatField(allow_null=True, help_text="of those, the share whose verdict changed with "
                                                                   "the order")
    human_compared = serializers.IntegerField(help_text="comparisons with a verdict and human labels")
    human_agreement = serializers.FloatField(allow_null=True, help_text=(
        "share where the verdict (orders combined) equals the humans' majority"))
    kappa = serializers.FloatField(allow_null=True, help_text="Cohen's κ of the verdict and the humans' majority")
    balanced_agreement = serializers.FloatField(allow_null=True, help_text=(
        "mean over the humans' labels (+, =, -) of the share the judge labelled alike"))
    savings_pairs = serializers.IntegerField(help_text="pairs the savings bound is estimated on")
    savings_eta2 = serializers.FloatField(allow_null=True, help_text="mean share of a pair's human-label variance "
                                                                      "the judge's label explains")
    savings_uniform = serializers.FloatField(allow_null=True, help_text=(
        "least share of a human-only rule's labels (half a pair's items) any rule reading this judge could make do "
        "with, items drawn uniformly (protocol.savings)"))
    savings_active = serializers.FloatField(allow_null=True, help_text="the same, items drawn by the judge's label")


class JudgeRunSerializer(serializers.Serializer):
    """A judge run's settings (the key's environment variable by name only), progress and cost."""
    id = serializers.IntegerField()
    status = serializers.ChoiceField(choices=["queued", "running", "done", "failed"])
    metric = serializers.CharField()
    model = serializers.CharField()
    base_url = serializers.CharField()
    api_key_env = serializers.CharField(help_text="the environment variable the key is read from (never the key)")
    prompt = serializers.CharField(help_text="the prompt's name, or sha256:<12 hex> of its texts")
    criteria = serializers.ListField(child=serializers.CharField())
    both_orders = serializers.BooleanField()
    samples = serializers.IntegerField()
    concurrency = serializers.IntegerField()
    scope = serializers.ChoiceField(choices=["all", "undecided_first", "undecided"])
    total = serializers.IntegerField(help_text="(comparison, criterion, order) units to judge")
    done = serializers.IntegerField()
    already = serializers.IntegerField(help_text="units stored by an earlier run")
    verdicts = serializers.IntegerField()
    unparsed = serializers.IntegerField()
    calls = serializers.IntegerField(help_text="calls this run paid for")
    cache_hits = serializers.IntegerField()
    retries = serializers.IntegerField()
    prompt_tokens = serializers.IntegerField()
    completion_tokens = serializers.IntegerField()
    error = serializers.CharField(allow_blank=True)
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)


class StudyJudgesSerializer(serializers.Serializer):
    judges = JudgeStatsSerializer(many=True)
    runs = JudgeRunSerializer(many=True)
