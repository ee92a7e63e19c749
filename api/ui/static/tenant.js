// isofabric console, tenant page: the usage chart (node-hours per day by QoS class).
// Data: the page's <script type="application/json" id="usage-data"> block, built by the server
// from the usage records use case (api/ui/usage_chart.py). Drawn by Chart.js (vendor/chart.js).
// Colours come from CSS custom properties (--qos-<class>, else --chart-<n>): no inline style.
"use strict";

(() => {
  const block = document.getElementById("usage-data");
  const canvas = document.getElementById("usage-chart");
  if (!block || !canvas || typeof window.Chart === "undefined") {
    return;
  }
  const data = JSON.parse(block.textContent);
  const styles = getComputedStyle(document.documentElement);
  const colour = (qos, index) =>
    styles.getPropertyValue(`--qos-${qos}`).trim() ||
    styles.getPropertyValue(`--chart-${(index % 6) + 1}`).trim() ||
    "#2f6fb0";
  const datasets = data.series.map((series, index) => ({
    label: series.qos_class,
    data: series.node_hours,
    backgroundColor: colour(series.qos_class, index),
    borderWidth: 0,
  }));
  new window.Chart(canvas, {
    type: "bar",
    data: { labels: data.labels, datasets },
    options: {
      animation: false,
      maintainAspectRatio: false,
      responsive: true,
      scales: {
        x: { stacked: true, ticks: { maxRotation: 0, autoSkipPadding: 12 } },
        y: { stacked: true, beginAtZero: true, title: { display: true, text: data.unit } },
      },
      plugins: {
        legend: { position: "bottom" },
        tooltip: { callbacks: { label: (item) => `${item.dataset.label}: ${item.formattedValue} ${data.unit}` } },
      },
    },
  });
})();
