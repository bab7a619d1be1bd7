// The study page's interactive charts (templates/_interactive.html), from the JSON API:
//   GET /studies/{id}/epochs  every trial's metrics per epoch, and the tuning trials' knobs and objective
//   GET /studies/{id}/tuning  knob importance per method and evaluator (studies.tuning)
// Per-epoch curves are drawn by uPlot (vendor/uplot, served by the service: nothing is fetched from
// elsewhere); the parallel coordinates and the importance bars are small SVGs drawn here. While the study
// runs the data is fetched again every few seconds; the charts keep what the reader picked.
"use strict";
(() => {
  // The static figures' colours (studies/tables/svg.py PALETTE): a method looks the same in both.
  const PALETTE = ["#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#000000"];
  const SVG_NS = "http://www.w3.org/2000/svg";
  const TERMINAL = new Set(["succeeded", "failed", "cancelled"]);
  const POLL_MS = 5000;
  const IMPORTANCE_EVERY_MS = 30000; // Optuna's evaluators cost the server a second or so: not every poll
  const EPOCH_HEIGHT = 320;

  // A metric as the pages print one (Python's "{:.4g}", base.html's normlab.number).
  function number(value) {
    if (value === null || value === undefined || !Number.isFinite(value)) return "–";
    if (value === 0) return "0";
    const exponent = Math.floor(Math.log10(Math.abs(value)));
    if (exponent < -4 || exponent >= 4) {
      const [mantissa, power] = value.toExponential(3).split("e");
      const digits = Math.abs(Number(power)).toString().padStart(2, "0");
      return mantissa.replace(/\.?0+$/, "") + "e" + (Number(power) < 0 ? "-" : "+") + digits;
    }
    return String(Number(value.toPrecision(4)));
  }

  const finite = (value) => typeof value === "number" && Number.isFinite(value);
  const knobText = (value) => (finite(value) ? number(value) : String(value));

  function svg(tag, attributes = {}, text = null) {
    const element = document.createElementNS(SVG_NS, tag);
    for (const [name, value] of Object.entries(attributes)) element.setAttribute(name, String(value));
    if (text !== null) element.textContent = text;
    return element;
  }

  function html(tag, attributes = {}, text = null) {
    const element = document.createElement(tag);
    for (const [name, value] of Object.entries(attributes)) element.setAttribute(name, String(value));
    if (text !== null) element.textContent = text;
    return element;
  }

  // One colour per method: the spec's methods first, in its order, then any other a trial names.
  function methodColours(methods, trials) {
    const names = [...new Set([...methods, ...trials.map((trial) => trial.method)])];
    return new Map(names.map((name, i) => [name, PALETTE[i % PALETTE.length]]));
  }

  // A tooltip inside a chart's host (position: relative): lines of text, never markup (they hold names
  // users chose). It ignores the pointer, so it never takes the hover from what it describes.
  function tooltip(host, id) {
    const box = html("div", { id, class: "plot-tooltip", role: "tooltip" });
    box.hidden = true;
    host.append(box);
    return {
      element: box,
      show(lines, x, y) {
        box.replaceChildren(...lines.map((line) => html("div", {}, line)));
        box.hidden = false;
        const room = host.clientWidth - box.offsetWidth - 4;
        box.style.left = `${Math.max(0, Math.min(x + 14, room))}px`;
        box.style.top = `${Math.max(0, y - box.offsetHeight - 10)}px`;
      },
      hide() { box.hidden = true; },
    };
  }

  // Where a point of the host's own coordinates is, from a client (viewport) position.
  function within(host, clientX, clientY) {
    const box = host.getBoundingClientRect();
    return [clientX - box.left, clientY - box.top];
  }

  // ---- per-epoch curves (uPlot) ------------------------------------------------------------------------

  function fillSelect(select, options, wanted) {
    const values = options.map(([value]) => value);
    const chosen = values.includes(wanted) ? wanted : values[0];
    const same = select.options.length === options.length
      && options.every(([value, label], i) => select.options[i].value === value && select.options[i].text === label);
    if (!same) select.replaceChildren(...options.map(([value, label]) => html("option", { value }, label)));
    if (chosen !== undefined) select.value = chosen;
    return chosen;
  }

  // The trials of `phase` that reported `metric`, and uPlot's columns: the epochs (x), then one per trial
  // with null where it reported no finite value (a gap the line spans).
  function epochColumns(trials, metric, phase) {
    const shown = trials.filter((trial) => (phase === "all" || trial.phase === phase)
      && trial.epochs.some((row) => finite(row.metrics[metric])));
    const epochs = [...new Set(shown.flatMap((trial) => trial.epochs
      .filter((row) => finite(row.metrics[metric])).map((row) => row.epoch)))].sort((a, b) => a - b);
    const columns = shown.map((trial) => {
      const byEpoch = new Map(trial.epochs.map((row) => [row.epoch, row.metrics[metric]]));
      return epochs.map((epoch) => (finite(byEpoch.get(epoch)) ? byEpoch.get(epoch) : null));
    });
    return { shown, data: [epochs, ...columns] };
  }

  class EpochChart {
    constructor(host, metricSelect, phaseSelect, empty) {
      this.host = host;
      this.metricSelect = metricSelect;
      this.phaseSelect = phaseSelect;
      this.empty = empty;
      this.tip = tooltip(host, "epoch-tooltip");
      this.plot = null;
      this.data = null;
      metricSelect.addEventListener("change", () => this.draw());
      phaseSelect.addEventListener("change", () => this.draw());
      new ResizeObserver(() => this.plot?.setSize(this.size())).observe(host);
    }

    size() { return { width: Math.max(280, this.host.clientWidth), height: EPOCH_HEIGHT }; }

    update(data) {
      this.data = data;
      fillSelect(this.metricSelect, data.metrics.map((m) => [m, m]), this.metricSelect.value || data.default_metric);
      const phases = [...new Set(data.trials.filter((t) => t.epochs.length).map((t) => t.phase))];
      const phaseOptions = [["all", "all phases"], ...phases.map((p) => [p, p])];
      fillSelect(this.phaseSelect, phaseOptions, this.phaseSelect.value || "all");
      this.phaseSelect.disabled = phases.length < 2;
      this.draw();
    }

    draw() {
      const data = this.data;
      if (!data) return;
      const metric = this.metricSelect.value;
      const phase = this.phaseSelect.value || "all";
      this.plot?.destroy();
      this.plot = null;
      this.tip.hide();
      this.host.dataset.metric = metric;
      const { shown, data: columns } = metric ? epochColumns(data.trials, metric, phase) : { shown: [] };
      this.empty.hidden = shown.length > 0;
      this.empty.textContent = !data.metrics.length ? "No trial has reported an epoch yet."
        : `No trial${phase === "all" ? "" : ` of the ${phase} phase`} reported ${metric}.`;
      if (!shown.length) return;
      const colours = methodColours(data.methods, data.trials);
      let focused = null;
      const options = {
        ...this.size(),
        scales: { x: { time: false } },
        legend: { show: false },
        focus: { alpha: 0.25 },
        cursor: { focus: { prox: 24 }, points: { size: 7 } },
        axes: [
          { label: "epoch", incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500], values: (u, ticks) => ticks.map(String) },
          { label: metric, size: 60, values: (u, ticks) => ticks.map(number) },
        ],
        series: [
          { label: "epoch" },
          ...shown.map((trial) => ({
            label: trial.label,
            stroke: colours.get(trial.method),
            width: 1.5,
            spanGaps: true,
            dash: trial.status === "running" ? [5, 4] : undefined,
            points: { size: 5 },
          })),
        ],
        hooks: {
          // uPlot focuses the line nearest the pointer (within `prox` px) before it reports the cursor.
          setSeries: [(u, index) => { focused = index; }],
          setCursor: [(u) => this.point(u, shown, metric, focused)],
        },
      };
      this.plot = new uPlot(options, columns, this.host);
      this.host.uplot = this.plot; // where a point is drawn (valToPos), for scripts and the page tests
    }

    point(u, shown, metric, focused) {
      const index = u.cursor.idx;
      const value = focused && index !== null && index !== undefined ? u.data[focused][index] : null;
      if (value === null || value === undefined) {
        this.tip.hide();
        return;
      }
      const trial = shown[focused - 1];
      const epoch = u.data[0][index];
      const over = u.over.getBoundingClientRect();
      const [x, y] = within(this.host, over.left + u.valToPos(epoch, "x"), over.top + u.valToPos(value, "y"));
      const seed = trial.seed === null ? "–" : trial.seed;
      const lines = [trial.label, `${metric} ${number(value)}`, `${trial.method} · seed ${seed} · epoch ${epoch}`];
      if (trial.group) lines.push(`grid point ${trial.group}`);
      if (trial.status !== "succeeded") lines.push(trial.status);
      this.tip.show(lines, x, y);
    }
  }

  // ---- parallel coordinates (SVG) ----------------------------------------------------------------------

  // An axis over the values the trials take: linear, logarithmic where positive numbers span two decades
  // or more (learning rates), or evenly spaced categories where any value is not a number.
  function axisScale(values) {
    const present = values.filter((v) => v !== null && v !== undefined);
    if (present.length && present.every(finite)) {
      const low = Math.min(...present);
      const high = Math.max(...present);
      const log = low > 0 && high / low >= 100;
      const f = log ? Math.log10 : (v) => v;
      const span = f(high) - f(low);
      const at = (v) => (span === 0 ? 0.5 : (f(v) - f(low)) / span);
      const middle = log ? 10 ** ((Math.log10(low) + Math.log10(high)) / 2) : (low + high) / 2;
      // Whole numbers (an int knob, a width): a tick at each value taken, never one at 1.5.
      const distinct = [...new Set(present)].sort((a, b) => a - b);
      const whole = present.every(Number.isInteger) && distinct.length <= 8;
      const ticks = whole ? distinct : span === 0 ? [low] : [low, middle, high];
      return { at, ticks: ticks.map((v) => [at(v), number(v)]), log };
    }
    const categories = [...new Set(present.map(String))].sort();
    const at = (v) => (categories.length < 2 ? 0.5 : categories.indexOf(String(v)) / (categories.length - 1));
    return { at, ticks: categories.map((c) => [at(c), c]), log: false };
  }

  function drawParallel(host, tuning, colours, tip) {
    host.querySelector("svg")?.remove();
    tip.hide();
    const note = document.getElementById("parallel-note");
    if (!tuning || !tuning.knobs.length) {
      host.dataset.empty = "true";
      note.textContent = !tuning ? "This study has no tuning trials (yet): nothing to compare knobs on."
        : "No knob takes more than one value over the tuning trials: nothing to compare along.";
      return;
    }
    delete host.dataset.empty;
    const direction = tuning.higher_is_better ? "higher is better" : "lower is better";
    const axes = [...tuning.knobs.map((knob) => ({ name: knob, note: null, value: (t) => t.knobs[knob] })),
      { name: tuning.objective, note: direction, value: (t) => t.objective }];
    const scales = axes.map((axis) => axisScale(tuning.trials.map(axis.value)));
    const width = Math.max(560, 190 * axes.length);
    const height = 340;
    const [left, right, top, bottom] = [90, 90, 48, 20];
    const xOf = (i) => left + (axes.length < 2 ? 0 : (i * (width - left - right)) / (axes.length - 1));
    const yOf = (fraction) => top + (1 - fraction) * (height - top - bottom);
    const chart = svg("svg", {
      class: "parallel-coordinates", viewBox: `0 0 ${width} ${height}`, role: "img",
      "aria-label": `tuning trials: ${tuning.knobs.join(", ")} against ${tuning.objective}`,
    });
    chart.style.maxWidth = `${width}px`;
    axes.forEach((axis, i) => {
      const x = xOf(i);
      const group = svg("g", { class: "pc-axis" });
      group.append(svg("line", { x1: x, x2: x, y1: yOf(0), y2: yOf(1) }));
      group.append(svg("text", { x, y: 16, class: "pc-axis-name" }, axis.name));
      const note = [axis.note, scales[i].log ? "log scale" : null].filter(Boolean).join(", ");
      if (note) group.append(svg("text", { x, y: 31, class: "pc-axis-note" }, `(${note})`));
      for (const [fraction, label] of scales[i].ticks) {
        group.append(svg("line", { x1: x - 4, x2: x, y1: yOf(fraction), y2: yOf(fraction) }));
        group.append(svg("text", { x: x - 7, y: yOf(fraction) + 4, class: "pc-tick" }, label));
      }
      chart.append(group);
    });
    for (const trial of tuning.trials) {
      // A knob the trial's method does not have breaks its line there; a failed trial ends before the objective.
      let d = "";
      let drawing = false;
      axes.forEach((axis, i) => {
        const value = axis.value(trial);
        if (value === null || value === undefined) { drawing = false; return; }
        d += `${drawing ? "L" : "M"}${xOf(i).toFixed(1)},${yOf(scales[i].at(value)).toFixed(1)}`;
        drawing = true;
      });
      const group = svg("g", { class: "pc-trial", "data-trial-key": trial.trial_key, "data-method": trial.method });
      const line = svg("path", { d, class: "pc-line", stroke: colours.get(trial.method) });
      if (trial.objective === null) line.classList.add("pc-no-objective");
      group.append(line, svg("path", { d, class: "pc-hit" }));
      const lines = [trial.label, `${trial.method} · seed ${trial.seed === null ? "–" : trial.seed}`,
        ...tuning.knobs.filter((k) => k in trial.knobs).map((k) => `${k} ${knobText(trial.knobs[k])}`),
        `${tuning.objective} ${trial.objective === null ? `– (${trial.status})` : number(trial.objective)}`];
      group.addEventListener("mouseenter", () => {
        chart.classList.add("pc-hovering");
        group.classList.add("pc-active");
      });
      group.addEventListener("mousemove", (event) => tip.show(lines, ...within(host, event.clientX, event.clientY)));
      group.addEventListener("mouseleave", () => {
        chart.classList.remove("pc-hovering");
        group.classList.remove("pc-active");
        tip.hide();
      });
      chart.append(group);
    }
    host.prepend(chart);
    note.textContent = `${tuning.trials.length} ${tuning.phase} trial(s), one line each through its searched `
      + "knobs to its objective; point at a line for its knobs (dashed: no objective)";
  }

  // ---- knob importance (SVG bars) ----------------------------------------------------------------------

  const EVALUATOR_NAMES = { fanova: "fANOVA", ped_anova: "PED-ANOVA" };

  function drawImportance(host, answer, colours, tip) {
    host.replaceChildren();
    tip.hide();
    host.append(tip.element);
    const tuning = answer?.tuning;
    if (!tuning || !tuning.methods.length) {
      host.append(html("p", { class: "muted" }, "This study searches no knobs: there is no importance to show."));
      return;
    }
    for (const method of tuning.methods) {
      const importance = method.importance;
      const figure = html("figure", { class: "importance", "data-method": method.method });
      figure.append(html("figcaption", {}, `${method.method}: ${importance.trials} completed trial(s)`));
      if (importance.reason) figure.append(html("p", { class: "muted" }, importance.reason));
      for (const evaluator of importance.evaluators) {
        const name = EVALUATOR_NAMES[evaluator.evaluator] || evaluator.evaluator;
        if (!evaluator.knobs.length) {
          figure.append(html("p", { class: "muted" }, `${name}: ${evaluator.reason || "no numbers"}`));
          continue;
        }
        figure.append(importanceBars(method.method, name, evaluator, colours.get(method.method), tip, host));
        if (evaluator.spread_over) figure.append(html("p", { class: "muted importance-spread" }, `${name} spread over ${evaluator.spread_over}`));
      }
      for (const [knob, why] of Object.entries(importance.omitted || {})) {
        figure.append(html("p", { class: "muted" }, `${knob} left out: ${why}`));
      }
      host.append(figure);
    }
  }

  function importanceBars(method, name, evaluator, colour, tip, host) {
    const row = 26;
    const [labelWidth, barWidth, valueWidth] = [130, 320, 110];
    const width = labelWidth + barWidth + valueWidth;
    const height = 26 + row * evaluator.knobs.length + 6;
    const spread = evaluator.fits > 1 ? ` (mean of ${evaluator.fits} fits)` : "";
    const chart = svg("svg", {
      class: "importance-bars", viewBox: `0 0 ${width} ${height}`, role: "img",
      "aria-label": `${method}: knob importance by ${name}`, "data-evaluator": evaluator.evaluator,
    });
    chart.style.maxWidth = `${width}px`;
    chart.append(svg("text", { x: 0, y: 16, class: "importance-title" }, `${name}${spread}`));
    const xOf = (share) => labelWidth + Math.max(0, Math.min(1, share)) * barWidth;
    evaluator.knobs.forEach((knob, i) => {
      const y = 26 + i * row;
      const group = svg("g", { class: "importance-bar", "data-knob": knob.knob });
      group.append(svg("text", { x: labelWidth - 8, y: y + 16, class: "importance-knob" }, knob.knob));
      group.append(svg("rect", { x: labelWidth, y: y + 4, width: xOf(knob.importance) - labelWidth, height: row - 8, fill: colour }));
      if (knob.high > knob.low) {
        group.append(svg("line", { x1: xOf(knob.low), x2: xOf(knob.high), y1: y + row / 2, y2: y + row / 2, class: "importance-range" }));
      }
      const sd = knob.sd === null ? "" : ` ± ${number(knob.sd)}`;
      group.append(svg("text", { x: xOf(Math.max(knob.importance, knob.high)) + 6, y: y + 16, class: "importance-value" },
        `${number(knob.importance)}${sd}`));
      const lines = [`${method} · ${knob.knob}`, `${name} share ${number(knob.importance)}${sd}`,
        `range over fits ${number(knob.low)} to ${number(knob.high)}`];
      group.addEventListener("mousemove", (event) => tip.show(lines, ...within(host, event.clientX, event.clientY)));
      group.addEventListener("mouseleave", () => tip.hide());
      chart.append(group);
    });
    return chart;
  }

  // ---- the method legend, the data and its polls ------------------------------------------------------

  function drawLegend(element, colours) {
    element.replaceChildren(...[...colours].map(([method, colour]) => {
      const entry = html("span", { class: "plot-legend-entry", "data-method": method });
      const swatch = html("span", { class: "plot-swatch" });
      swatch.style.background = colour;
      entry.append(swatch, document.createTextNode(method));
      return entry;
    }));
  }

  async function json(url) {
    const response = await fetch(url, { headers: { Accept: "application/json" }, cache: "no-store" });
    if (!response.ok) throw new Error(`${url}: HTTP ${response.status}`);
    return response.json();
  }

  function start(section) {
    // The study page's root carries the study's status, which the page's own script keeps current.
    const statusOf = () => section.closest("[data-status]")?.dataset.status;
    const active = () => !TERMINAL.has(statusOf() || "succeeded");
    const epochs = new EpochChart(document.getElementById("epoch-chart"), document.getElementById("epoch-metric"),
      document.getElementById("epoch-phase"), document.getElementById("epoch-empty"));
    const parallelHost = document.getElementById("parallel-chart");
    const parallelTip = tooltip(parallelHost, "parallel-tooltip");
    const importanceHost = document.getElementById("importance-chart");
    const importanceTip = tooltip(importanceHost, "importance-tooltip");
    let lastEpochs = "";
    let colours = new Map();
    let scoredAtImportance = null; // how many tuning trials had an objective when importance was fetched
    let importanceAt = 0;

    // The epochs, drawn again only when they changed (a redraw would drop the reader's zoom and hover).
    async function refreshEpochs() {
      const data = await json(section.dataset.epochsUrl);
      const text = JSON.stringify(data);
      if (text !== lastEpochs) {
        lastEpochs = text;
        colours = methodColours(data.methods, data.trials);
        drawLegend(document.getElementById("method-legend"), colours);
        epochs.update(data);
        drawParallel(parallelHost, data.tuning, colours, parallelTip);
      }
      return data;
    }

    // Importance again once more tuning trials have an objective: at most every IMPORTANCE_EVERY_MS while
    // the study runs, and at once when it has ended.
    async function refreshImportance(data, ended) {
      const scored = (data.tuning?.trials || []).filter((t) => t.objective !== null).length;
      if (scored === scoredAtImportance) return;
      if (scoredAtImportance !== null && !ended && Date.now() - importanceAt < IMPORTANCE_EVERY_MS) return;
      scoredAtImportance = scored;
      importanceAt = Date.now();
      drawImportance(importanceHost, await json(section.dataset.tuningUrl), colours, importanceTip);
    }

    async function tick() {
      const wasActive = active();
      try {
        await refreshImportance(await refreshEpochs(), !wasActive);
        section.dataset.ready = "true"; // every chart drawn: what the page tests wait for
      } catch (error) {
        // A poll that failed is tried again with the next; one that never succeeded says so.
        section.dataset.ready = "false";
        console.warn("charts not refreshed:", error.message);
        if (!lastEpochs) {
          const empty = document.getElementById("epoch-empty");
          empty.textContent = `The charts' data did not load (${error.message}); the figures above show the curves.`;
          empty.hidden = false;
        }
      }
      // One more round once the study has ended, so its last epochs and final importance are drawn.
      if (wasActive) setTimeout(tick, POLL_MS);
    }

    tick();
  }

  const section = document.getElementById("interactive");
  if (section && typeof uPlot === "function") start(section);
})();
