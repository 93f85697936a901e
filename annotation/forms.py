from django import forms


class StudyUploadForm(forms.Form):
    bundle = forms.FileField(help_text="Study bundle: .jsonl or .jsonl.gz")
    slug = forms.SlugField(required=False, help_text="URL name; default: from the study's name")
    metric = forms.CharField(required=False, help_text="Metric for the protocol; default: the bundle's setting")
