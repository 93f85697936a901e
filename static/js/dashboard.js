// Draws the server-built plotly figures (JSON in <script type="application/json">) and
// redraws them after htmx swaps in fresh data. Without JavaScript the tables still show.
(function () {
  function draw(root) {
    if (!window.Plotly) return;
    root.querySelectorAll(".plot").forEach(function (div) {
      var data = document.getElementById(div.id.replace(/^plot-/, ""));
      if (!data) return;
      var figure = JSON.parse(JSON.parse(data.textContent));
      Plotly.react(div, figure.data, figure.layout, { displaylogo: false, responsive: true });
    });
  }
  document.addEventListener("DOMContentLoaded", function () { draw(document); });
  document.addEventListener("htmx:afterSwap", function (event) { draw(event.detail.target.ownerDocument); });
})();
