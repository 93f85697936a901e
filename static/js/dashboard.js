// Draws the server-built plotly figures (JSON in <script type="application/json" id="figure-NAME">)
// into <div class="plot" id="plot-NAME" hx-preserve>. The htmx refresh keeps the plot divs
// themselves (hx-preserve) and swaps only the data, so Plotly.react updates each chart in
// place: its classes, mode bar, zoom (layout.uirevision) and hover survive every refresh.
// Without JavaScript the fallback tables in each chart card show instead.
(function () {
  document.documentElement.classList.add("js");
  var config = { displaylogo: false, responsive: true, modeBarButtonsToRemove: ["select2d", "lasso2d"] };

  function draw() {
    if (!window.Plotly) return;
    document.querySelectorAll(".plot").forEach(function (div) {
      var data = document.getElementById(div.id.replace(/^plot-/, "figure-"));
      if (!data) return;
      var card = div.closest(".chart");
      if (card) card.classList.add("drawn");
      var text = data.textContent;
      if (div.dataset.drawn === text) return;  // same figure: nothing to redraw
      var figure = JSON.parse(text);
      Plotly.react(div, figure.data, figure.layout, config);
      div.dataset.drawn = text;
      // A heatmap cell opens its pair's page: row system first (the page redirects to the
      // pair's own order).
      if (div.dataset.pairUrl && !div.dataset.linked) {
        div.dataset.linked = "1";
        div.on("plotly_click", function (event) {
          var point = event.points && event.points[0];
          if (!point || point.x === point.y) return;
          window.location.assign(div.dataset.pairUrl + "?first=" + encodeURIComponent(point.y) +
                                 "&second=" + encodeURIComponent(point.x));
        });
      }
    });
  }
  document.addEventListener("DOMContentLoaded", draw);
  document.addEventListener("htmx:afterSwap", draw);
})();
