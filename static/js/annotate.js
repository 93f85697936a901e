// The HIT form's helpers: time on task, keyboard answers, the minimum time before answering,
// one answer per rendered HIT, and the next HIT opening at the top. The form works without
// this file (the server enforces the minimum time and idempotency on its own).
(function () {
  var KEY_GRACE_MS = 600; // keys pressed this soon after a HIT appears were meant for the previous one
  var shownAt = performance.now();
  var unlockTimer = null;
  function form() { return document.querySelector("form[data-hit-form]"); }
  function answerButtons(f) { return f ? f.querySelectorAll(".answers button") : []; }

  function prepare() {
    shownAt = performance.now();
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
    syncPanes(document.getElementById("diff-left"), document.getElementById("diff-right"), toggle);
  }

  document.addEventListener("DOMContentLoaded", prepare);
  document.addEventListener("htmx:afterSwap", prepare);
  document.addEventListener("DOMContentLoaded", prepareScrolling);
  document.addEventListener("htmx:afterSwap", prepareScrolling);
  document.addEventListener("submit", function (event) {
    var f = event.target.closest("form[data-hit-form]");
    if (!f) return;
    if (f.dataset.answered) { // one answer per rendered HIT
      event.preventDefault();
      event.stopImmediatePropagation();
      return;
    }
    f.dataset.answered = "1";
    f.elements.seconds.value = seconds();
  }, true);
  document.addEventListener("htmx:configRequest", function (event) {
    var f = form();
    if (f && event.detail.elt === f) { event.detail.parameters.seconds = seconds(); }
  });
  document.addEventListener("keydown", function (event) {
    if (event.repeat || event.altKey || event.ctrlKey || event.metaKey) return;
    if (event.target.matches("input, textarea, select, summary")) return;
    if (performance.now() - shownAt < KEY_GRACE_MS) return;
    var f = form();
    var button = f && f.querySelector('button[data-key="' + event.key + '"]');
    if (button && !button.disabled && !f.dataset.answered) { event.preventDefault(); button.click(); }
  });
})();
