"""LLM judge runs: a judge model over a study's comparisons, its verdicts stored as one of the
study's preference metrics (docs/judges.md).

``judge_run_create`` validates a run and makes its metrics (one per criterion judged in a
rubric study); the page schedules it through annotation/jobs.py, ``manage.py judge`` runs it
in its own process. ``judge_run_execute`` does the work: the run's units are (comparison,
criterion, order) — a comparison is an item of a pair on which both systems have an output,
judged in both presentation orders or in one chosen per comparison by a hash — and a unit
whose verdict (or unparsed answer) is stored already is skipped. The rest are called with
``concurrency`` calls in flight at all times (a slow call holds one thread, not a batch); each
call's answer is written to the cache (JudgeCall, keyed by protocol.judge_prompts.call_key) as
soon as it arrives, and the units whose answers are all in are stored a batch at a time: their
verdicts, unparsed units and counters in one transaction. A process killed mid-batch leaves
the batch's paid answers in the cache and nothing else of it, so the next attempt (a second
command, the page's resume, the sweep) judges that batch again from the cache without paying
twice, and no unit is stored twice.

The API key is read from the environment variable the run names, in the process that runs it,
and is never written anywhere. A run never writes into a metric the study's protocol uses or
may use (``Study.metric``, a criterion's metric): a judge added to a study is a new metric to
compare; the protocol's metric is chosen at launch and fixed once the protocol has started.
"""
from __future__ import annotations

import logging
import os
import re
import socket
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

from protocol.judge_prompts import (
    AB,
    ORDERS,
    JudgePrompt,
    call_key,
    canonical_verdict,
    combine_samples,
    default_prompt,
    parse_verdict,
    single_order,
)

from .. import jobs
from ..llm import ChatEndpoint, EndpointError
from ..models import (Item, JudgeCall, JudgeRun, JudgeUnparsed, Metric, MetricPreference, Output, PairState,
                      Study)
from ..rubrics import criterion_metrics, is_rubric, study_rubric

log = logging.getLogger(__name__)

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
MAX_SAMPLES = 9
# Temperature of a run's calls: MT-Bench's 0 for one sample; several samples need variety.
SAMPLE_TEMPERATURE = 0.7
# Units per batch (one transaction) per call in flight.
BATCH_PER_THREAD = 8
# A run silent this long has lost its process; the sweep (or a command) resumes it.
JUDGE_STALE_AFTER = timedelta(minutes=5)
JUDGE_MAX_ATTEMPTS = 5
HEARTBEAT_SECONDS = 10.0


def metric_name_default(*, model: str, prompt: JudgePrompt, samples: int) -> str:
    """``judge:<model>``; with a prompt other than the default its label, with samples their count."""
    name = f"judge:{model}"
    if prompt.name not in ("mt-bench-pair-v2", "mt-bench-pair-v2-criterion"):
        name += f":{prompt.label}"
    return name + (f":k{samples}" if samples > 1 else "")


def run_metric_names(run: JudgeRun) -> dict[str, str]:
    """criterion name -> the metric its verdicts go to (``metric_name``, in a rubric study
    ``metric_name:criterion``)."""
    rubric = is_rubric(run.study)
    return {c: f"{run.metric_name}:{c}" if rubric else run.metric_name for c in run.criteria}


def endpoint_allowed(*, api_key_env: str, base_url: str) -> bool:
    """May a run started from a page send the key of ``api_key_env`` to ``base_url``
    (settings.EVALAPP_JUDGE_ENDPOINTS)?"""
    return base_url.rstrip("/") in {u.rstrip("/") for u in settings.EVALAPP_JUDGE_ENDPOINTS.get(api_key_env, ())}


def _owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _owner_gone(owner: str) -> bool:
    """Has the process ``owner`` (host:pid) ended? Known only on its own host."""
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def judge_run_live(run: JudgeRun, now=None) -> bool:
    """Is the run queued or running, with a sign of life within JUDGE_STALE_AFTER and a process
    that has not ended (a killed command's run is not live, whatever its last heartbeat)?"""
    if run.status not in (JudgeRun.Status.QUEUED, JudgeRun.Status.RUNNING):
        return False
    if run.status == JudgeRun.Status.RUNNING and run.owner and _owner_gone(run.owner):
        return False
    last = run.heartbeat_at or run.created_at
    return last is not None and last >= (now or timezone.now()) - JUDGE_STALE_AFTER


def judge_run_create(*, study: Study, user=None, model: str, base_url: str, api_key_env: str = "OPENAI_API_KEY",
                     prompt: JudgePrompt | None = None, metric_name: str = "", both_orders: bool = True,
                     samples: int = 1, concurrency: int = 4, criterion: str = "", scope: str = JudgeRun.Scope.ALL,
                     from_page: bool = False, schedule: bool = False) -> JudgeRun:
    """Store a judge run (ValueError naming the problem) and make its metrics; ``schedule``
    hands it to annotation/jobs.py after commit (a page), else the caller runs it
    (``judge_run_execute``). ``from_page``: the endpoint must be one settings allow."""
    model, base_url, api_key_env = model.strip(), base_url.strip(), api_key_env.strip()
    if not model:
        raise ValueError("name the judge model")
    if not re.match(r"^https?://", base_url):
        raise ValueError("the base URL must start with http:// or https://")
    if not ENV_NAME.match(api_key_env):
        raise ValueError("the API key's environment variable must be a name (letters, digits, _), not a key")
    if from_page and not endpoint_allowed(api_key_env=api_key_env, base_url=base_url):
        raise ValueError(f"this server does not send ${api_key_env} to {base_url} (EVALAPP_JUDGE_ENDPOINTS)")
    if api_key_env not in os.environ:
        raise ValueError(f"the environment variable {api_key_env} is not set in this server's environment")
    if not 1 <= samples <= MAX_SAMPLES:
        raise ValueError(f"samples must be between 1 and {MAX_SAMPLES}")
    if not 1 <= concurrency <= settings.EVALAPP_JUDGE_MAX_CONCURRENCY:
        raise ValueError(f"concurrency must be between 1 and {settings.EVALAPP_JUDGE_MAX_CONCURRENCY}")
    if scope not in JudgeRun.Scope.values:
        raise ValueError(f"scope must be one of {', '.join(JudgeRun.Scope.values)}")
    criteria = study_rubric(study)
    if criterion:
        if criterion not in {c.name for c in criteria}:
            raise ValueError(f"no criterion {criterion!r} in this study; it has {', '.join(c.name for c in criteria)}")
        criteria = tuple(c for c in criteria if c.name == criterion)
    prompt = prompt or default_prompt(rubric=is_rubric(study))
    metric_name = (metric_name or metric_name_default(model=model, prompt=prompt, samples=samples)).strip()
    if not metric_name or len(metric_name) > 150:
        raise ValueError("the metric's name must have 1 to 150 characters")
    run = JudgeRun(study=study, created_by=user if getattr(user, "is_authenticated", False) else None,
                   metric_name=metric_name, model=model, base_url=base_url, api_key_env=api_key_env,
                   prompt_name=prompt.label, prompt_system=prompt.system, prompt_template=prompt.template,
                   criteria=[c.name for c in criteria], both_orders=both_orders, samples=samples,
                   concurrency=concurrency, scope=scope)
    try:
        run.full_clean()
    except ValidationError as error:
        raise ValueError("; ".join(error.messages)) from None
    protocol_metrics = {name for name in criterion_metrics(study).values() if name}
    with transaction.atomic():
        Study.objects.select_for_update().filter(pk=study.pk).first()  # one creation per study at a time
        for criterion_name, name in run_metric_names(run).items():
            if name in protocol_metrics:
                raise ValueError(f"{name!r} is a metric of this study's protocol: a judge run writes a new metric "
                                 "(the protocol's metric is fixed once the protocol has started); name another")
            metric = Metric.objects.filter(study=study, name=name).first()
            if metric is not None:
                if metric.kind != Metric.Kind.PREFERENCE:
                    raise ValueError(f"the study's metric {name!r} holds scores, not a judge's verdicts; name another")
                if MetricPreference.objects.filter(metric=metric).exclude(judge=model, prompt=prompt.label).exists():
                    raise ValueError(f"the study's metric {name!r} holds verdicts of another judge or prompt; "
                                     "name another metric")
        busy = [r for r in JudgeRun.objects.filter(study=study, metric_name=metric_name,
                                                   status__in=[JudgeRun.Status.QUEUED, JudgeRun.Status.RUNNING])
                if judge_run_live(r)]
        if busy:
            raise ValueError(f"judge run {busy[0].pk} is writing metric {metric_name!r} now; wait for it or resume it")
        for name in run_metric_names(run).values():
            Metric.objects.get_or_create(study=study, name=name, defaults={"kind": Metric.Kind.PREFERENCE})
        run.save()
        if schedule:
            transaction.on_commit(lambda: jobs.judge_run(run.pk))
    return run


def judge_run_resumable(*, study: Study, model: str, base_url: str, prompt: JudgePrompt, metric_name: str,
                        both_orders: bool, samples: int, criteria: list[str], scope: str) -> JudgeRun | None:
    """The newest unfinished run with these settings (a command run again continues it)."""
    return JudgeRun.objects.filter(
        study=study, model=model, base_url=base_url, prompt_system=prompt.system, prompt_template=prompt.template,
        metric_name=metric_name, both_orders=both_orders, samples=samples, criteria=criteria, scope=scope,
    ).exclude(status=JudgeRun.Status.DONE).order_by("-created_at", "-id").first()


def judge_run_resume(*, run: JudgeRun, schedule: bool = True) -> JudgeRun:
    """Queue an unfinished run again (ValueError when it is finished or still alive)."""
    if run.status == JudgeRun.Status.DONE:
        raise ValueError("the run is finished")
    if run.status == JudgeRun.Status.RUNNING and judge_run_live(run):
        raise ValueError("the run is running; it goes on by itself")
    if run.api_key_env not in os.environ:
        raise ValueError(f"the environment variable {run.api_key_env} is not set in this server's environment")
    JudgeRun.objects.filter(pk=run.pk).update(status=JudgeRun.Status.QUEUED, error="", heartbeat_at=timezone.now())
    if schedule:
        transaction.on_commit(lambda: jobs.judge_run(run.pk))
    run.refresh_from_db()
    return run


def judge_runs_resume(*, now=None) -> int:
    """Resume every unfinished run whose process ended (no sign of life for JUDGE_STALE_AFTER, or
    its process known to have ended), or mark it failed after JUDGE_MAX_ATTEMPTS starts;
    returns the runs resumed. Part of the periodic sweep. A failed run is the researcher's to
    resume."""
    cutoff = (now or timezone.now()) - JUDGE_STALE_AFTER
    unfinished = JudgeRun.objects.filter(status__in=[JudgeRun.Status.QUEUED, JudgeRun.Status.RUNNING])
    stalled = [run for run in unfinished
               if (run.heartbeat_at or run.created_at) < cutoff
               or (run.status == JudgeRun.Status.RUNNING and run.owner and _owner_gone(run.owner))]
    resumed = 0
    for run in stalled:
        if run.attempts >= JUDGE_MAX_ATTEMPTS:
            JudgeRun.objects.filter(pk=run.pk).update(
                status=JudgeRun.Status.FAILED, finished_at=timezone.now(),
                error=f"the run stopped {run.attempts} times without finishing (its process ended); resume it")
            continue
        if JudgeRun.objects.filter(pk=run.pk, heartbeat_at=run.heartbeat_at).update(heartbeat_at=timezone.now()):
            jobs.judge_run(run.pk)
            resumed += 1
    return resumed


# --- The work ------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Unit:
    """One comparison, criterion and order to judge; ``shown_first`` / ``shown_second`` the
    outputs in the order shown."""
    metric_id: int
    criterion: str
    item_id: int
    first_id: int
    second_id: int
    order: str
    shown_first: int
    shown_second: int

    @property
    def key(self) -> tuple:
        return self.metric_id, self.item_id, self.first_id, self.second_id, self.order


def _pairs_in_scope(run: JudgeRun) -> list[tuple[int, int, str, str]]:
    rows = list(PairState.objects.filter(study=run.study).order_by("first__name", "second__name").values_list(
        "first_id", "second_id", "first__name", "second__name", "decision"))
    if run.scope == JudgeRun.Scope.UNDECIDED:
        rows = [r for r in rows if r[4] == 0]
    elif run.scope == JudgeRun.Scope.UNDECIDED_FIRST:
        rows.sort(key=lambda r: r[4] != 0)  # stable: the undecided first, each part by name
    return [r[:4] for r in rows]


def _units(run: JudgeRun) -> list[Unit]:
    """Every unit of the run in its order: pair by pair, item by item (position), criterion, order."""
    study = run.study
    metrics = dict(Metric.objects.filter(study=study, name__in=run_metric_names(run).values())
                   .values_list("name", "pk"))
    metric_of = {c: metrics[name] for c, name in run_metric_names(run).items()}
    outputs: dict[tuple[int, int], tuple[int, int]] = {}  # (item, system) -> (sample, output id)
    for item_id, system_id, sample, pk in Output.objects.filter(item__study=study, item__withdrawn=False) \
            .values_list("item_id", "system_id", "sample", "pk"):
        found = outputs.get((item_id, system_id))
        if found is None or (sample == study.shown_sample) or (found[0] != study.shown_sample and sample < found[0]):
            outputs[(item_id, system_id)] = (sample, pk)
    items = list(Item.objects.filter(study=study, withdrawn=False).order_by("position", "pk")
                 .values_list("pk", "external_id"))
    units = []
    for first_id, second_id, first, second in _pairs_in_scope(run):
        for item_id, external in items:
            a, b = outputs.get((item_id, first_id)), outputs.get((item_id, second_id))
            if a is None or b is None:
                continue
            orders = ORDERS if run.both_orders else (single_order(external, first, second),)
            for criterion in run.criteria:
                for order in orders:
                    shown = (a[1], b[1]) if order == AB else (b[1], a[1])
                    units.append(Unit(metric_of[criterion], criterion, item_id, first_id, second_id, order, *shown))
    return units


def _finished(run: JudgeRun) -> set[tuple]:
    """The units stored already: a verdict or an unparsed answer of the run's metrics."""
    metric_ids = list(Metric.objects.filter(study=run.study, name__in=run_metric_names(run).values())
                      .values_list("pk", flat=True))
    fields = ("metric_id", "item_id", "first_id", "second_id", "order")
    done = set(MetricPreference.objects.filter(metric_id__in=metric_ids).values_list(*fields))
    return done | set(JudgeUnparsed.objects.filter(metric_id__in=metric_ids).values_list(*fields))


@dataclass
class Progress:
    """What a run has done, for a command's progress bar: units done of total, this attempt's
    calls, tokens, cache hits and retries."""
    total: int = 0
    done: int = 0
    calls: int = 0
    cache_hits: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    verdicts: int = 0
    unparsed: int = 0


def _chunks(units: list[Unit], size: int) -> Iterator[list[Unit]]:
    for start in range(0, len(units), size):
        yield units[start:start + size]


def _fail(run_id: int, message: str) -> None:
    JudgeRun.objects.filter(pk=run_id).update(status=JudgeRun.Status.FAILED, error=message[:2000],
                                              finished_at=timezone.now(), heartbeat_at=timezone.now())


def judge_run_execute(*, run_id: int, progress: Callable[[Progress], None] | None = None) -> JudgeRun:
    """Run a judge run to its end (or its failure), from where it stands; a finished one is
    left as it is. ``progress`` is called after each batch."""
    run = JudgeRun.objects.select_related("study").get(pk=run_id)
    if run.status == JudgeRun.Status.DONE:
        return run
    api_key = os.environ.get(run.api_key_env)
    if api_key is None:
        _fail(run_id, f"the environment variable {run.api_key_env} is not set in the process that ran the judge")
        return JudgeRun.objects.get(pk=run_id)
    now = timezone.now()
    JudgeRun.objects.filter(pk=run_id).update(status=JudgeRun.Status.RUNNING, attempts=F("attempts") + 1,
                                              started_at=run.started_at or now, heartbeat_at=now, error="",
                                              owner=_owner())
    try:
        units = _units(run)
        finished = _finished(run)
        pending = [u for u in units if u.key not in finished]
        first_attempt = run.attempts == 0
        JudgeRun.objects.filter(pk=run_id).update(
            total=len(units), done=len(units) - len(pending),
            **({"already": len(units) - len(pending)} if first_attempt else {}))
        state = Progress(total=len(units), done=len(units) - len(pending))
        if progress:
            progress(state)
        _judge(run, api_key, pending, state, progress)
    except EndpointError as error:
        log.warning("judge run %s stopped: %s", run_id, error)
        _fail(run_id, f"{error}. What was judged is kept; resume the run to go on.")
    except Exception as error:  # stored for the researcher; the page shows it
        log.exception("judge run %s failed", run_id)
        _fail(run_id, str(error) or repr(error))
    else:
        JudgeRun.objects.filter(pk=run_id).update(status=JudgeRun.Status.DONE, finished_at=timezone.now(),
                                                  heartbeat_at=timezone.now())
    return JudgeRun.objects.get(pk=run_id)


def _texts(units: Iterable[Unit], study: Study) -> tuple[dict[int, str], dict[int, tuple[str, str]]]:
    """(output id -> text, item id -> (input, reference)) of ``units``."""
    units = list(units)
    outputs = dict(Output.objects.filter(pk__in={u.shown_first for u in units} | {u.shown_second for u in units})
                   .values_list("pk", "text"))
    items = {pk: (text, reference) for pk, text, reference in Item.objects.filter(
        pk__in={u.item_id for u in units}).values_list("pk", "input", "reference")}
    return outputs, items


@dataclass
class _Waiting:
    """A unit loaded and not yet stored: its call keys, and how many of them cost no call (the
    cache, or a call another unit of the window asked for)."""
    unit: Unit
    keys: list[str]
    hits: int


def _judge(run: JudgeRun, api_key: str, pending: list[Unit], state: Progress,
           progress: Callable[[Progress], None] | None) -> None:
    """Judge ``pending``: calls kept ``run.concurrency`` in flight across batches (a slow call
    holds one thread, not the batch), each answer cached as it arrives, the units whose answers
    are all in stored ``batch`` at a time in one transaction."""
    prompt = JudgePrompt(run.prompt_name, run.prompt_system, run.prompt_template)
    labels = {c.name: c.label for c in study_rubric(run.study)}
    temperature = 0.0 if run.samples == 1 else SAMPLE_TEMPERATURE
    batch = max(run.concurrency * BATCH_PER_THREAD, 1)
    endpoint = ChatEndpoint(base_url=run.base_url, api_key=api_key, timeout=settings.EVALAPP_JUDGE_TIMEOUT,
                            max_retries=settings.EVALAPP_JUDGE_MAX_RETRIES, backoff=settings.EVALAPP_JUDGE_BACKOFF)
    chunks = _chunks(pending, batch)
    answers: dict[str, int | None] = {}     # key -> verdict of the keys answered (cache or call)
    needed: Counter[str] = Counter()         # key -> waiting units that need it
    waiting: list[_Waiting] = []
    queued: deque[tuple[str, list[dict[str, str]]]] = deque()
    asked: set[str] = set()                  # keys queued or in flight
    in_flight: dict[Future, str] = {}
    retries = 0

    def load() -> bool:
        """The next chunk of units: their messages, the cache's answers, the calls still to make."""
        chunk = next(chunks, None)
        if chunk is None:
            return False
        outputs, items = _texts(chunk, run.study)
        loaded, messages_of = [], {}
        for unit in chunk:
            question, reference = items[unit.item_id]
            messages = prompt.messages(question=question, answer_a=outputs[unit.shown_first],
                                       answer_b=outputs[unit.shown_second], reference=reference,
                                       criterion=labels.get(unit.criterion, unit.criterion))
            keys = [call_key(model=run.model, messages=messages, order=unit.order, sample=k,
                             temperature=temperature) for k in range(run.samples)]
            loaded.append((unit, keys))
            for key in keys:
                messages_of.setdefault(key, messages)
        unknown = [key for key in messages_of if key not in answers and key not in asked]
        answers.update(JudgeCall.objects.filter(key__in=unknown).values_list("key", "verdict"))
        for unit, keys in loaded:
            hits = 0
            for key in keys:
                needed[key] += 1
                if key in answers or key in asked:
                    hits += 1
                else:
                    queued.append((key, messages_of[key]))
                    asked.add(key)
            waiting.append(_Waiting(unit, keys, hits))
        return True

    def store(done: list[_Waiting]) -> None:
        nonlocal retries, waiting
        stored, unparsed = _store(run, [w.unit for w in done], [w.keys for w in done], answers,
                                  hits=sum(w.hits for w in done), retries=retries)
        state.done += len(done)
        state.cache_hits += sum(w.hits for w in done)
        state.retries += retries
        state.verdicts += stored
        state.unparsed += unparsed
        retries = 0
        gone = {id(w) for w in done}
        waiting = [w for w in waiting if id(w) not in gone]
        for w in done:
            for key in w.keys:
                needed[key] -= 1
                if needed[key] <= 0:
                    del needed[key]
                    answers.pop(key, None)
        if progress:
            progress(state)

    beat = time.monotonic()
    more = True
    pool = ThreadPoolExecutor(max_workers=run.concurrency, thread_name_prefix=f"judge-{run.pk}")
    try:
        while True:
            # enough calls queued to keep every thread busy; at most two batches of units held
            while more and len(queued) < run.concurrency and len(waiting) < 2 * batch:
                more = load()
            while queued and len(in_flight) < run.concurrency:
                key, messages = queued.popleft()
                in_flight[pool.submit(endpoint.complete, model=run.model, messages=messages,
                                      temperature=temperature)] = key
            if in_flight:
                finished, _ = wait(in_flight, return_when=FIRST_COMPLETED)
                for future in finished:
                    key = in_flight.pop(future)
                    answer = future.result()  # EndpointError ends the run (the others are cancelled)
                    verdict = parse_verdict(answer.content)
                    _cache(key, run, answer, verdict)
                    answers[key] = verdict
                    asked.discard(key)
                    retries += answer.retries
                    state.calls += 1
                    state.prompt_tokens += answer.prompt_tokens
                    state.completion_tokens += answer.completion_tokens
            ready = [w for w in waiting if all(key in answers for key in w.keys)]
            last = not (more or queued or in_flight)
            if ready and (len(ready) >= batch or last):
                store(ready)
                beat = time.monotonic()
            elif time.monotonic() - beat > HEARTBEAT_SECONDS:
                JudgeRun.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now())
                beat = time.monotonic()
            if last:
                break
    except BaseException:
        for future in in_flight:
            future.cancel()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        endpoint.close()


def _cache(key: str, run: JudgeRun, answer, verdict: int | None) -> None:
    """Keep one answer (its own transaction: it is paid for whatever happens to the batch)."""
    try:
        with transaction.atomic():
            JudgeCall.objects.create(key=key, run=run, model=run.model, content=answer.content, verdict=verdict,
                                     prompt_tokens=answer.prompt_tokens, completion_tokens=answer.completion_tokens,
                                     seconds=answer.seconds)
    except IntegrityError:
        pass  # another run cached the same call meanwhile: its answer stands


def _store(run: JudgeRun, batch: list[Unit], unit_keys: list[list[str]], verdicts: dict[str, int | None], *,
           hits: int, retries: int) -> tuple[int, int]:
    """A batch's verdicts, unparsed units and counters in one transaction (every answer it uses
    is in the cache already: a kill between leaves the cache, never a verdict without one)."""
    preferences, unparsed = [], []
    for unit, keys in zip(batch, unit_keys):
        shown = combine_samples(verdicts[key] for key in keys)
        value = canonical_verdict(shown, unit.order)
        common = dict(metric_id=unit.metric_id, item_id=unit.item_id, first_id=unit.first_id,
                      second_id=unit.second_id, order=unit.order)
        if value is None:
            unparsed.append(JudgeUnparsed(run=run, **common))
        else:
            preferences.append(MetricPreference(value=value, judge=run.model, prompt=run.prompt_name, **common))
    with transaction.atomic():
        MetricPreference.objects.bulk_create(preferences)
        JudgeUnparsed.objects.bulk_create(unparsed)
        JudgeRun.objects.filter(pk=run.pk).update(
            done=F("done") + len(batch), verdicts=F("verdicts") + len(preferences),
            unparsed=F("unparsed") + len(unparsed), cache_hits=F("cache_hits") + hits,
            retries=F("retries") + retries, heartbeat_at=timezone.now())
    return len(preferences), len(unparsed)
