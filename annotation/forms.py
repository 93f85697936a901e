from django import forms


class StudyUploadForm(forms.Form):
    bundle = forms.FileField(help_text="Study bundle: .jsonl or .jsonl.gz")
    slug = forms.SlugField(required=False, help_text="URL name; default: from the study's name")
    metric = forms.CharField(required=False, help_text="Metric for the protocol; default: the bundle's setting")


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
    item_choice_temperature = forms.FloatField(min_value=0.01, max_value=10.0,
                                               help_text="weighted choice: lower = stronger preference for separable items")
