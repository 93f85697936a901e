// The HIT form's helpers: time on task and time to read (from the texts shown to the first
// answer chosen), keyboard answers, the minimum time before answering, one answer per rendered
// HIT, the next HIT opening at the top, aligned scrolling. The form works without this file
// (the server enforces the answers, the minimum time and idempotency on its own).
//
// Keys (docs/crowd.md, "Keyboard"): 1/2/3 answer a one-question HIT. In a rubric, digits
// answer the criterion that has the focus (at first the first one) and move the focus to the
// next one unanswered, never into a reason box; R opens the reason box of the answer just
// given, Escape leaves it, Enter submits when every criterion is answered and says plainly
// what is missing otherwise. A key that cannot be meant for the HIT on screen is refused with
// a visible note: an auto-repeat or a key held down since before the HIT appeared, a key
// pressed while the previous answer is being saved, or one pressed as the HIT appeared.
(function () {
  var REACTION_MS = 200; // sooner than anyone reacts to a new HIT: the key was for the last one
  var shownAt = performance.now();
  var firstAnswerAt = null;
  var unlockTimer = null;
  var noteTimer = null;
  var down = {};  // keys held down now
  var stale = {}; // keys that were down when the HIT appeared, until released
  var TYPING = "input[type=text], input:not([type]), textarea, select";
  function form() { return document.querySelector("form[data-hit-form]"); }
  function answerButtons(f) { return f ? f.querySelectorAll(".answers button") : []; }
  function criteria(f) { return Array.prototype.slice.call(f.querySelectorAll("fieldset[data-criterion]")); }

  function note(text) { // "" hides it
    var shown = document.querySelector("#hit [data-key-note]");
    if (!shown) return;
    shown.textContent = text;
    shown.hidden = !text;
    clearTimeout(noteTimer);
    noteTimer = setTimeout(function () { shown.hidden = true; }, 5000);
  }

  function prepare() {
    shownAt = performance.now();
    firstAnswerAt = null;
    stale = Object.assign({}, down);
    window.scrollTo(0, 0);
    var f = form();
    if (!f) return;
    // When keys start to count for this HIT (performance.now()): browser tests wait for it
    // rather than guess how late a loaded machine runs this.
    f.dataset.keysFrom = String(Math.ceil(shownAt + REACTION_MS));
    var minimum = parseFloat(f.dataset.minSeconds || "0");
    if (unlockTimer) clearTimeout(unlockTimer);
    if (minimum > 0) {
      answerButtons(f).forEach(function (b) { b.disabled = true; });
      unlockTimer = setTimeout(function () {
        if (f.dataset.answered) return;
        answerButtons(f).forEach(function (b) { b.disabled = false; });
        var wait = f.querySelector("[data-wait]");
        if (wait) wait.hidden = true;
      }, minimum * 1000);
    }
    if (f.querySelector("[data-rubric]")) {
      f.noValidate = true; // missing(): said plainly, with the focus where the answer goes
      criteria(f)[0].focus({ preventScroll: true }); // digits start here, never in a text box
    } else if (document.activeElement && document.activeElement.matches(TYPING)) {
      document.activeElement.blur();
    }
  }
  function seconds() { return ((performance.now() - shownAt) / 1000).toFixed(2); }
  function readMs() { return Math.round((firstAnswerAt === null ? performance.now() : firstAnswerAt) - shownAt); }
  function answered() { if (firstAnswerAt === null) firstAnswerAt = performance.now(); }

  // A rubric by keyboard.
  function label(fieldset) { return "\u201c" + fieldset.dataset.label + "\u201d"; }
  function nextUnanswered(f, after) { // from the criterion after `after` on, round to the first
    var all = criteria(f);
    var start = after ? all.indexOf(after) + 1 : 0;
    for (var i = 0; i < all.length; i++) {
      var c = all[(start + i) % all.length];
      if (!c.querySelector("input:checked")) return c;
    }
    return null;
  }
  function current(f) {
    var focused = document.activeElement && document.activeElement.closest("fieldset[data-criterion]");
    return focused && f.contains(focused) ? focused : nextUnanswered(f);
  }
  function goTo(element) { // the page's scroll-padding keeps it above the sticky submit row
    element.focus({ preventScroll: true });
    element.scrollIntoView({ block: "nearest" });
  }
  function moveOn(f, from) { goTo(nextUnanswered(f, from) || f.querySelector("[data-submit-rubric]")); }
  function missing(f) { // what the rubric lacks before it is sent: [where, what to say], or null
    var all = criteria(f);
    for (var i = 0; i < all.length; i++) {
      if (!all[i].querySelector("input:checked")) {
        return [all[i], "Answer " + label(all[i]) + " (keys 1\u2013" + all[i].querySelectorAll("input[type=radio]").length + ")."];
      }
    }
    for (var j = 0; j < all.length; j++) {
      var box = all[j].querySelector("[data-reason=required]");
      if (box && all[j].querySelector("input:checked").value !== "0" && !box.value.trim()) {
        return [box, label(all[j]) + ": give a short reason (required when one answer is better)."];
      }
    }
    return null;
  }
  function rubricDigit(f, key) {
    var fieldset = current(f);
    if (!fieldset) { note("Every question is answered: Enter submits (Shift+Tab goes back to change an answer)."); return; }
    var radio = fieldset.querySelector('input[type=radio][data-key="' + key + '"]');
    if (!radio) { note("Keys 1\u2013" + fieldset.querySelectorAll("input[type=radio]").length + " answer " + label(fieldset) + "."); return; }
    radio.checked = true;
    radio.dispatchEvent(new Event("change", { bubbles: true }));
    moveOn(f, fieldset);
  }
  function reasonKey(f) {
    var last = f.dataset.last && f.querySelector('fieldset[data-criterion="' + f.dataset.last + '"] [data-reason]');
    var here = current(f);
    var box = last || (here && here.querySelector("[data-reason]"));
    if (box) goTo(box); else note("This question has no reason box.");
  }
  function submitRubric(f) {
    var button = f.querySelector("[data-submit-rubric]");
    if (button.disabled) note("Please read both first (" + f.dataset.minSeconds + " s)."); else button.click();
  }

  // Aligned scrolling of the two outputs (and of the two diff panes): scrolling one moves the
  // other to the same proportion of its height, while the box is ticked.
  function syncPanes(a, b, toggle) {
    if (!a || !b) return;
    var busy = false;
    function follow(from, to) {
      from.addEventListener("scroll", function () {
        if (busy || !toggle.checked) return;
        var range = from.scrollHeight - from.clientHeight;
        busy = true;
        to.scrollTop = range > 0 ? (from.scrollTop / range) * (to.scrollHeight - to.clientHeight) : 0;
        requestAnimationFrame(function () { busy = false; });
      });
    }
    follow(a, b);
    follow(b, a);
  }
  function prepareScrolling() {
    var sync = document.querySelector("[data-scroll-sync]");
    if (!sync) return;
    sync.hidden = false;
    var toggle = sync.querySelector("input");
    syncPanes(document.getElementById("output-left"), document.getElementById("output-right"), toggle);
  }
  function prepareDiffScrolling() {
    var label = document.querySelector("[data-scroll-sync]");
    if (label) syncPanes(document.getElementById("diff-left"), document.getElementById("diff-right"), label.querySelector("input"));
  }
  // The word differences arrive when their box is opened (htmx): that swap is no new HIT.
  function onSwap(event) {
    if (event.detail.elt && event.detail.elt.closest && event.detail.elt.closest("#word-diff")) {
      prepareDiffScrolling();
      return;
    }
    prepare();
    prepareScrolling();
  }

  // The HIT's lease: leaving the page gives it back at once, so that others are served its
  // comparison (a closed tab held it for the study's lease timeout); the page shown (again: a
  // reload, the back button) holds it anew, taking it back from its old page's release when
  // nobody took it meanwhile, else shows the next HIT (docs/crowd.md).
  function post(f, fields) { // a POST's body, with the form's CSRF token
    var data = new FormData();
    data.append("csrfmiddlewaretoken", f.querySelector("input[name=csrfmiddlewaretoken]").value);
    Object.keys(fields).forEach(function (name) { data.append(name, fields[name]); });
    return data;
  }
  window.addEventListener("pagehide", function () {
    var f = form();
    if (f && !f.dataset.answered && navigator.sendBeacon) navigator.sendBeacon(f.dataset.release, post(f, { lease: f.dataset.lease }));
  });
  window.addEventListener("pageshow", function () {
    var f = form();
    if (!f) return;
    fetch(f.dataset.keep, { method: "POST", body: post(f, {}), credentials: "same-origin" }).then(function (response) {
      // Gone (and not answered meanwhile from this page): reloaded, the page asks for the next HIT.
      if (response.status === 409 && form() === f && !f.dataset.answered) window.location.reload();
      return response.ok ? response.json() : null;
    }).then(function (kept) { if (kept && kept.lease) f.dataset.lease = kept.lease; });
  });

  document.addEventListener("DOMContentLoaded", prepare);
  document.addEventListener("DOMContentLoaded", prepareScrolling);
  document.addEventListener("htmx:afterSwap", onSwap);
  document.addEventListener("submit", function (event) {
    var f = event.target.closest("form[data-hit-form]");
    if (!f) return;
    var gap = f.dataset.answered ? null : f.querySelector("[data-rubric]") && missing(f);
    if (f.dataset.answered || gap) { // one answer per rendered HIT; a rubric only when complete
      event.preventDefault();
      event.stopImmediatePropagation();
      if (gap) { note(gap[1]); goTo(gap[0]); }
      return;
    }
    f.dataset.answered = "1";
    answered();
    f.elements.seconds.value = seconds();
    f.elements.read_ms.value = readMs();
  }, true);
  document.addEventListener("change", function (event) {
    var fieldset = event.target.closest("form[data-hit-form] fieldset[data-criterion]");
    if (!fieldset) return;
    answered();
    if (event.target.type === "radio") note(""); // an answer given: what was missing may be no more
    fieldset.form.dataset.last = fieldset.dataset.criterion; // R: the reason of this answer
  });
  document.addEventListener("htmx:configRequest", function (event) {
    var f = form();
    if (f && event.detail.elt === f) {
      answered();
      event.detail.parameters.seconds = seconds();
      event.detail.parameters.read_ms = readMs();
    }
  });
  document.addEventListener("keyup", function (event) { delete down[event.key]; delete stale[event.key]; });
  window.addEventListener("blur", function () { down = {}; stale = {}; }); // their keyups go elsewhere
  document.addEventListener("keydown", function (event) {
    var key = event.key;
    var held = event.repeat || stale[key];
    down[key] = true;
    var f = form();
    var target = event.target.nodeType === 1 ? event.target : document.body;
    if (!f || event.altKey || event.ctrlKey || event.metaKey || target.closest("details.flag")) return;
    var rubric = f.querySelector("[data-rubric]");
    if (target.matches(TYPING)) { // a reason box: keys type the reason; Escape leaves it, Enter submits (or goes to what is missing)
      if (!rubric || !target.matches("[data-reason]") || (key !== "Escape" && key !== "Enter")) return;
      event.preventDefault();
      if (key === "Escape") moveOn(f, target.closest("fieldset")); else submitRubric(f);
      return;
    }
    var enter = key === "Enter" && rubric && (target === document.body || f.contains(target));
    var button = !rubric && f.querySelector('.answers button[data-key="' + key + '"]');
    // a rubric's digits are its scales' keys, from the page (data-keys: protocol/scales.py declares them)
    var digit = rubric && key.length === 1 && rubric.dataset.keys.indexOf(key) >= 0;
    if (!(enter || button || digit || (rubric && (key === "r" || key === "R")))) return;
    var refused = held ? "Key ignored: it was held down from before this comparison. Release it and press again."
      : f.dataset.answered ? "Saving your answer\u2026"
      : performance.now() - shownAt < REACTION_MS ? "Key ignored: this comparison had only just appeared. Press again to answer it."
      : button && button.disabled ? "Please read both first (" + f.dataset.minSeconds + " s)." : "";
    if (refused) { event.preventDefault(); note(refused); return; }
    if (enter && target.matches("button")) return; // the focused button's own Enter
    event.preventDefault();
    if (button) button.click();
    else if (enter) submitRubric(f);
    else if (key === "r" || key === "R") reasonKey(f);
    else rubricDigit(f, key);
  });
})();
