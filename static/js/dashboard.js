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
      // A heatmap cell carries its pair page's address (customdata): a click opens it.
      if (div.dataset.links && !div.dataset.linked) {
        div.dataset.linked = "1";
        div.on("plotly_click", function (event) {
          var point = event.points && event.points[0];
          if (point && point.customdata) window.location.assign(point.customdata);
        });
      }
    });
  }
  document.addEventListener("DOMContentLoaded", draw);
  document.addEventListener("htmx:afterSwap", draw);
})();
