"""The form that starts a judge run from a study's judges page (views_judges.py).

The researcher never types a key: they pick one of the endpoints the deployment allows
(settings.EVALAPP_JUDGE_ENDPOINTS: a base URL and the name of the environment variable whose
key may be sent there), name the model, and optionally upload a JSON prompt."""
from __future__ import annotations

from django import forms
from django.conf import settings

from protocol.judge_prompts import prompt_from_json

from .models import JudgeRun
from .rubrics import is_rubric, study_rubric
from .services.judges import MAX_SAMPLES

MAX_PROMPT_BYTES = 64 * 1024


def endpoint_choices() -> list[tuple[str, str]]:
    """(value, label) of every (base URL, key variable) the settings allow."""
    return [(f"{env}|{url}", f"{url} · key from ${env}")
            for env, urls in sorted(settings.EVALAPP_JUDGE_ENDPOINTS.items()) for url in urls]


class JudgeRunForm(forms.Form):
    endpoint = forms.ChoiceField(label="Endpoint", help_text="an OpenAI-compatible chat-completions endpoint and the "
                                 "environment variable its API key is read from (EVALAPP_JUDGE_ENDPOINTS)")
    model = forms.CharField(max_length=200, help_text="the judge model as the endpoint names it")
    metric_name = forms.CharField(label="Metric", max_length=150, required=False,
                                  help_text="the metric its verdicts become (default judge:<model>)")
    both_orders = forms.BooleanField(label="Both orders", required=False, initial=True,
                                     help_text="judge every comparison with each output shown first (AB and BA)")
    samples = forms.IntegerField(min_value=1, max_value=MAX_SAMPLES, initial=1,
                                 help_text="answers per comparison and order, their majority the verdict")
    concurrency = forms.IntegerField(min_value=1, initial=4)
    criterion = forms.ChoiceField(required=False, help_text="which criterion to judge")
    scope = forms.ChoiceField(choices=JudgeRun.Scope.choices, initial=JudgeRun.Scope.ALL, label="Comparisons")
    prompt_file = forms.FileField(label="Prompt (optional)", required=False,
                                  help_text="JSON with system_prompt and prompt_template; default: MT-Bench's "
                                            "pairwise prompt")

    def __init__(self, *args, study, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["endpoint"].choices = endpoint_choices()
        # the most calls in flight is a setting: read when the form is made
        self.fields["concurrency"] = forms.IntegerField(min_value=1, max_value=settings.EVALAPP_JUDGE_MAX_CONCURRENCY,
                                                        initial=4, help_text="calls in flight at once")
        if is_rubric(study):
            self.fields["criterion"].choices = [("", "every criterion")] + [(c.name, c.label)
                                                                             for c in study_rubric(study)]
        else:
            del self.fields["criterion"]

    def clean_prompt_file(self):
        upload = self.cleaned_data.get("prompt_file")
        if not upload:
            return None
        if upload.size > MAX_PROMPT_BYTES:
            raise forms.ValidationError(f"the prompt file is larger than {MAX_PROMPT_BYTES // 1024} KB")
        try:
            return prompt_from_json(upload.read().decode("utf-8"), fallback_name="")
        except (UnicodeDecodeError, ValueError) as error:
            raise forms.ValidationError(str(error)) from None

    def run_arguments(self) -> dict:
        """The valid form as judge_run_create's keyword arguments."""
        data = self.cleaned_data
        env, _, url = data["endpoint"].partition("|")
        return {"model": data["model"], "base_url": url, "api_key_env": env, "metric_name": data["metric_name"],
                "both_orders": data["both_orders"], "samples": data["samples"], "concurrency": data["concurrency"],
                "criterion": data.get("criterion") or "", "scope": data["scope"], "prompt": data["prompt_file"]}
