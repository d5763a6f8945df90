/* headwater console: draws the charts (Chart.js) of the page and refreshes them.
   A canvas with data-series="/api/series/..." is a line chart of
   {"labels": [epoch seconds], "series": {name: [value or null]}}, fetched again every
   refresh period; a canvas with data-bars='{"count": n}' is a bar chart of that object.
   The tables are refreshed by htmx (hx-trigger="every Ns" in base.html). */
(function () {
  "use strict";
  const refresh = parseFloat(document.body.dataset.refresh || "5") * 1000;
  const palette = ["#2563eb", "#dc2626", "#16a34a", "#d97706", "#7c3aed", "#0891b2",
                   "#db2777", "#65a30d"];

  function clock(epochSeconds) {
    return new Date(epochSeconds * 1000).toLocaleTimeString([], {hour12: false});
  }

  function lineData(data) {
    return {
      labels: data.labels.map(clock),
      datasets: Object.entries(data.series).map(([name, values], i) => ({
        label: name, data: values, spanGaps: true, pointRadius: 2, borderWidth: 2,
        borderColor: palette[i % palette.length],
        backgroundColor: palette[i % palette.length],
      })),
    };
  }

  function lineChart(canvas) {
    const chart = new Chart(canvas, {
      type: "line", data: {labels: [], datasets: []},
      options: {animation: false, responsive: true, maintainAspectRatio: false,
                scales: {y: {beginAtZero: true}}, plugins: {legend: {position: "bottom"}}},
    });
    async function load() {
      try {
        const response = await fetch(canvas.dataset.series, {cache: "no-store"});
        if (!response.ok) return;
        const data = await response.json();
        chart.data = lineData(data);
        chart.update();
        canvas.dataset.points = String(data.labels.length);
      } catch (e) { /* the next refresh tries again */ }
    }
    load();
    setInterval(load, refresh);
  }

  function barChart(canvas) {
    const bars = JSON.parse(canvas.dataset.bars || "{}");
    new Chart(canvas, {
      type: "bar",
      data: {labels: Object.keys(bars).map((k) => k + " deliveries"),
             datasets: [{label: "records", data: Object.values(bars),
                         backgroundColor: palette[0]}]},
      options: {animation: false, responsive: true, maintainAspectRatio: false,
                scales: {y: {beginAtZero: true, ticks: {precision: 0}}},
                plugins: {legend: {display: false}}},
    });
  }

  document.querySelectorAll("canvas[data-series]").forEach(lineChart);
  document.querySelectorAll("canvas[data-bars]").forEach(barChart);
})();
