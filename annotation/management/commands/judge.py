"""manage.py judge SLUG --base-url URL --model NAME: run an LLM judge over a study's comparisons.

Calls any OpenAI-compatible chat-completions endpoint with the official client; the verdicts
become the study's metric ``judge:<model>`` (or ``--metric``). The API key is read from the
environment variable ``--api-key-env`` names (default OPENAI_API_KEY), never from the command
line. Runs in this process with a progress bar on stderr; run the same command again after a
failure or a kill and it continues where it stopped (the answers paid for are cached).
docs/judges.md.
"""
from __future__ import annotations

import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.db.models import Count, Sum
from tqdm import tqdm

from annotation.models import JudgeRun, Study
from annotation.rubrics import study_rubric
from annotation.services import judges
from protocol.judge_prompts import default_prompt, prompt_from_json
from annotation.rubrics import is_rubric


class Command(BaseCommand):
    help = "Run an LLM judge (an OpenAI-compatible endpoint) over a study's comparisons; resumes an unfinished run."

    def add_arguments(self, parser):
        parser.add_argument("slug")
        parser.add_argument("--base-url", required=True, help="the endpoint, e.g. https://api.openai.com/v1")
        parser.add_argument("--model", required=True, help="the judge model as the endpoint names it")
        parser.add_argument("--api-key-env", default="OPENAI_API_KEY",
                            help="the environment variable holding the API key (default OPENAI_API_KEY)")
        parser.add_argument("--prompt", help="a JSON prompt file (system_prompt, prompt_template; default: "
                                             "MT-Bench's pairwise prompt)")
        parser.add_argument("--both-orders", action="store_true",
                            help="judge every comparison in both presentation orders (AB and BA)")
        parser.add_argument("--samples", type=int, default=1, help="answers per comparison and order (majority)")
        parser.add_argument("--concurrency", type=int, default=4, help="calls in flight at once")
        parser.add_argument("--criterion", default="", help="one criterion of a rubric study (default: all)")
        parser.add_argument("--metric", default="", help="the metric's name (default judge:<model>)")
        parser.add_argument("--scope", default=JudgeRun.Scope.ALL, choices=JudgeRun.Scope.values,
                            help="all comparisons, the undecided pairs first, or only those")
        parser.add_argument("--no-progress", action="store_true", help="no progress bar")

    def handle(self, *args, slug, base_url, model, api_key_env, prompt, both_orders, samples, concurrency,
               criterion, metric, scope, no_progress, **options):
        try:
            study = Study.objects.get(slug=slug)
        except Study.DoesNotExist:
            raise CommandError(f"no study with slug {slug!r}") from None
        try:
            chosen = (prompt_from_json(Path(prompt).read_text(), fallback_name="") if prompt
                      else default_prompt(rubric=is_rubric(study)))
        except (OSError, ValueError) as error:
            raise CommandError(f"--prompt {prompt}: {error}") from None
        name = metric or judges.metric_name_default(model=model, prompt=chosen, samples=samples)
        criteria = [c.name for c in study_rubric(study) if not criterion or c.name == criterion]
        run = judges.judge_run_resumable(study=study, model=model.strip(), base_url=base_url.strip(), prompt=chosen,
                                         metric_name=name, both_orders=both_orders, samples=samples,
                                         criteria=criteria, scope=scope)
        if run is not None and run.status == JudgeRun.Status.RUNNING and judges.judge_run_live(run):
            raise CommandError(f"judge run {run.pk} is running in another process; wait for it")
        if run is not None:
            self.stderr.write(f"resuming judge run {run.pk} ({run.done} of {run.total} done)")
        else:
            try:
                run = judges.judge_run_create(study=study, model=model, base_url=base_url, api_key_env=api_key_env,
                                              prompt=chosen, metric_name=name, both_orders=both_orders,
                                              samples=samples, concurrency=concurrency, criterion=criterion,
                                              scope=scope)
            except ValueError as error:
                raise CommandError(str(error)) from None
            self.stderr.write(f"judge run {run.pk}: metric {run.metric_name!r}, model {run.model!r}, "
                              f"prompt {run.prompt_name!r}")
        bar = None

        def progress(state: judges.Progress) -> None:
            nonlocal bar
            if no_progress:
                return
            if bar is None:
                bar = tqdm(total=state.total, initial=state.done, unit="verdict", file=sys.stderr,
                           dynamic_ncols=True)
            bar.update(state.done - bar.n)
            bar.set_postfix(calls=state.calls, cached=state.cache_hits, retries=state.retries,
                            tokens=state.prompt_tokens + state.completion_tokens, refresh=False)

        run = judges.judge_run_execute(run_id=run.pk, progress=progress)
        if bar is not None:
            bar.close()
        paid = run.calls.aggregate(n=Count("id"), prompt=Sum("prompt_tokens"), completion=Sum("completion_tokens"))
        summary = (f"judge run {run.pk} {run.status}: {run.done} of {run.total} done ({run.already} before this run), "
                   f"{run.verdicts} verdicts stored, {run.unparsed} unparsed, {paid['n']} calls paid, "
                   f"{run.cache_hits} cache hits, {run.retries} retries, tokens {paid['prompt'] or 0} prompt + "
                   f"{paid['completion'] or 0} completion; metric {run.metric_name!r}")
        if run.status != JudgeRun.Status.DONE:
            raise CommandError(f"{summary}\n{run.error}\nRun the same command again to resume.")
        self.stdout.write(summary)
