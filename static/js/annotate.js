// Time on task and keyboard answers for the HIT form. The form works without this file.
(function () {
  var shownAt = performance.now();
  function form() { return document.querySelector("form[data-hit-form]"); }
  document.addEventListener("htmx:afterSwap", function () { shownAt = performance.now(); });
  document.addEventListener("submit", function (event) {
    var f = event.target.closest("form[data-hit-form]");
    if (f) { f.elements.seconds.value = ((performance.now() - shownAt) / 1000).toFixed(2); }
  }, true);
  document.addEventListener("htmx:configRequest", function (event) {
    var f = form();
    if (f && event.detail.elt === f) {
      event.detail.parameters.seconds = ((performance.now() - shownAt) / 1000).toFixed(2);
    }
  });
  document.addEventListener("keydown", function (event) {
    if (event.target.matches("input, textarea, select") || event.altKey || event.ctrlKey || event.metaKey) return;
    var f = form();
    var button = f && f.querySelector('button[data-key="' + event.key + '"]');
    if (button && !button.disabled) { event.preventDefault(); button.click(); }
  });
})();
