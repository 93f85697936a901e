"""Researcher screens of items: the item reader (one item: its texts, its outputs and every
judgement, verdict and report on it) and the item search (docs/studies.md, "Reading items").

An item is named in the query string (``?item=ID``), as the pair page names its pair: an
external id may hold any character, and a "/" would split a path while a "." or ".." segment
is resolved away by the browser before the request is sent.
"""
from __future__ import annotations

from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse

from protocol.preferences import canonical_pair

from . import selectors
from .access import access_study_as_researcher
from .http import bad_request, quoted
from .models import Study


def _dashboard_shown(study: Study) -> bool:
    """Does the dashboard (and so its quality table's rows) show for this study? A draft not
    launched is sent to its settings."""
    return study.status != Study.Status.DRAFT or study.protocol_started


@login_required
def item_reader(request: HttpRequest, slug: str) -> HttpResponse:
    """One item (``?item=ID``): its input and reference as annotators see them, the systems'
    outputs a page at a time (``&page=N``, selectors.items.OUTPUTS_PER_PAGE) and the judgements
    on each pair judged on it; ``&first=A&second=B``: that pair's two outputs side by side with
    its judgements, metric scores and judges' verdicts."""
    study = get_object_or_404(Study, slug=slug)
    access_study_as_researcher(request.user, study)
    external_id = request.GET.get("item")
    if not external_id:
        return bad_request(request, "name the item: ?item=ID (and, for one pair, &first=SYSTEM&second=SYSTEM)")
    item = selectors.items.study_item(study=study, external_id=external_id)
    if item is None:
        raise Http404(f"no item {quoted(external_id)} in this study")
    first, second = request.GET.get("first"), request.GET.get("second")
    pair = None
    if first or second:
        if not first or not second:
            return bad_request(request, "name both systems of the pair: &first=SYSTEM&second=SYSTEM")
        if first == second:
            return bad_request(request, f"a pair needs two different systems, got {quoted(first)} twice")
        systems = selectors.items.item_system_names(item=item)
        for name in (first, second):
            if name not in systems:
                raise Http404(f"no output of {quoted(name)} on item {quoted(external_id)}")
        a, b, sign = canonical_pair(first, second)
        if sign < 0:
            query = urlencode({"item": external_id, "first": a, "second": b})
            return redirect(f"{reverse('item_reader', kwargs={'slug': slug})}?{query}")
        pair = (a, b)
    data = selectors.items.item_reader_data(study=study, item=item, pair=pair, page=request.GET.get("page"))
    return render(request, "annotation/item_reader.html", {
        "study": study, **data, "quality_rows": _dashboard_shown(study),
        "item_query": urlencode({"item": external_id}),
        "pair_query": urlencode({"first": pair[0], "second": pair[1]}) if pair else ""})


@login_required
def item_search(request: HttpRequest, slug: str) -> HttpResponse:
    """The study's items by text (``?q=``: id, input, reference or an output holds it,
    case-insensitive), or those one worker judged (``?annotator=<id>``, from the quality
    table); judged items first, ITEMS_PER_PAGE a page (``&page=N``), each linking to its reader."""
    study = get_object_or_404(Study, slug=slug)
    access_study_as_researcher(request.user, study)
    query = request.GET.get("q", "").strip()
    if len(query) > selectors.items.MAX_QUERY_CHARS:
        return bad_request(request, f"the search is longer than {selectors.items.MAX_QUERY_CHARS} characters")
    annotator, raw = None, request.GET.get("annotator", "")
    if raw:
        if not (raw.isascii() and raw.isdigit() and len(raw) <= 18):
            return bad_request(request, f"annotator must be a worker's number (from the quality table), got {quoted(raw)}")
        annotator = selectors.items.study_annotator_of_study(study=study, annotator_id=int(raw))
        if annotator is None:
            raise Http404("no worker with this number answered in this study")
    found = selectors.items.item_search(study=study, query=query, annotator=annotator)
    page = Paginator(found, selectors.items.ITEMS_PER_PAGE).get_page(request.GET.get("page"))
    rows = selectors.items.item_search_rows(study=study, items=list(page.object_list), query=query, annotator=annotator)
    kept = {"q": query, "annotator": raw if annotator is not None else ""}
    return render(request, "annotation/item_search.html", {
        "study": study, "query": query, "annotator": annotator, "rows": rows, "items_page": page,
        "page_query": urlencode({k: v for k, v in kept.items() if v}), "quality_rows": _dashboard_shown(study)})
