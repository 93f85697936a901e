// The HIT form's helpers: time on task and time to read (from the texts shown to the first
// answer chosen), keyboard answers (a rubric: keys answer the criterion being worked on, then
// move on to its reason or the next criterion; Enter submits), the minimum time before
// answering, one answer per rendered HIT, and the next HIT opening at the top. The form works without
// this file (the server enforces the minimum time and idempotency on its own).
(function () {
  var KEY_GRACE_MS = 600; // keys pressed this soon after a HIT appears were meant for the previous one
  var shownAt = performance.now();
  var firstAnswerAt = null;
  var unlockTimer = null;
  var TYPING = "input[type=text], input:not([type]), textarea, select, summary";
  function form() { return document.querySelector("form[data-hit-form]"); }
  function answerButtons(f) { return f ? f.querySelectorAll(".answers button") : []; }

  function prepare() {
    shownAt = performance.now();
    firstAnswerAt = null;
    window.scrollTo(0, 0);
    var f = form();
    if (!f) return;
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
  }
  function seconds() { return ((performance.now() - shownAt) / 1000).toFixed(2); }
  function readMs() { return Math.round((firstAnswerAt === null ? performance.now() : firstAnswerAt) - shownAt); }
  function answered() { if (firstAnswerAt === null) firstAnswerAt = performance.now(); }

  // A rubric's keys: the criterion that holds the focus, else the first one unanswered.
  function currentCriterion(f) {
    var focused = document.activeElement && document.activeElement.closest("fieldset[data-criterion]");
    if (focused && f.contains(focused)) return focused;
    var all = f.querySelectorAll("fieldset[data-criterion]");
    for (var i = 0; i < all.length; i++) { if (!all[i].querySelector("input:checked")) return all[i]; }
    return all[all.length - 1];
  }
  function moveOn(f, fieldset) {
    var reason = fieldset.querySelector(".reason input");
    if (reason) { reason.focus(); return; }
    var all = Array.prototype.slice.call(f.querySelectorAll("fieldset[data-criterion]"));
    var next = all[all.indexOf(fieldset) + 1];
    if (next) { (next.querySelector("input:checked") || next.querySelector("input[type=radio]")).focus(); return; }
    f.querySelector("[data-submit-rubric]").focus();
  }
  function rubricKey(f, key) {
    var fieldset = currentCriterion(f);
    var radio = fieldset && fieldset.querySelector('input[type=radio][data-key="' + key + '"]');
    if (!radio || radio.disabled) return false;
    radio.checked = true;
    radio.dispatchEvent(new Event("change", { bubbles: true }));
    moveOn(f, fieldset);
    return true;
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
    var label = document.querySelector("[data-scroll-sync]");
    if (!label) return;
    label.hidden = false;
    var toggle = label.querySelector("input");
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

  document.addEventListener("DOMContentLoaded", prepare);
  document.addEventListener("DOMContentLoaded", prepareScrolling);
  document.addEventListener("htmx:afterSwap", onSwap);
  document.addEventListener("submit", function (event) {
    var f = event.target.closest("form[data-hit-form]");
    if (!f) return;
    if (f.dataset.answered) { // one answer per rendered HIT
      event.preventDefault();
      event.stopImmediatePropagation();
      return;
    }
    f.dataset.answered = "1";
    answered();
    f.elements.seconds.value = seconds();
    f.elements.read_ms.value = readMs();
  }, true);
  document.addEventListener("change", function (event) {
    if (event.target.closest("form[data-hit-form] [data-rubric]")) answered();
  });
  document.addEventListener("htmx:configRequest", function (event) {
    var f = form();
    if (f && event.detail.elt === f) {
      answered();
      event.detail.parameters.seconds = seconds();
      event.detail.parameters.read_ms = readMs();
    }
  });
  document.addEventListener("keydown", function (event) {
    if (event.repeat || event.altKey || event.ctrlKey || event.metaKey) return;
    if (event.target.matches(TYPING)) return;
    if (performance.now() - shownAt < KEY_GRACE_MS) return;
    var f = form();
    if (f && f.querySelector("[data-rubric]")) {
      if (!f.dataset.answered && /^[1-5]$/.test(event.key) && rubricKey(f, event.key)) event.preventDefault();
      return;
    }
    var button = f && f.querySelector('button[data-key="' + event.key + '"]');
    if (button && !button.disabled && !f.dataset.answered) { event.preventDefault(); button.click(); }
  });
})();
