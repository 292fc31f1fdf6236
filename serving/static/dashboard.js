// Reflexio impact dashboard: vanilla JS over the service's JSON APIs (same origin), charts as inline SVG.
// Nothing here loads from another origin; the page's Content-Security-Policy forbids it.
//
// Data-test hooks: [data-chart] on chart hosts; [data-series] on one <g> per agent version (line charts) or per
// bar; [data-point] on every plotted point (data-x = day, data-y = value); [data-bar] on bars;
// [data-testid="queue-row"][data-playbook-id] on approval-queue rows; [data-usage-day] on LLM usage rows, their
// cells [data-field] (data-value = the per-1k figure); [data-judge] on the judge label of every rate;
// [data-holdout-row] on treated-vs-control rows; [data-item-row] on outcome-counter rows (cells [data-field]);
// body[data-ready] once the first load ends.
(() => {
  'use strict';

  const SVG_NS = 'http://www.w3.org/2000/svg';
  const DAY_MS = 86400000;
  const PALETTE = ['#2f5bd3', '#e07a1f', '#17864a', '#b83280', '#6b46c1', '#0e8a9a', '#b7791f', '#4a5568'];

  const state = {
    allMetrics: [], // every impact_metrics row
    signals: [], // rows of the rule-based session signals (evaluation "session_signals", judge heuristic)
    evaluations: [], // [{key, name, judge}] of the evaluators with rows
    evaluation: null, // the selected evaluator's key
    holdout: [],
    items: null,
    itemsError: null,
    metrics: [], // the selected evaluator's rows
    metricsMsg: '',
    metricsError: null,
    versions: [],
    colors: new Map(),
    stats: null,
    statsError: null,
    queue: null,
    queueError: null,
    usage: null,
    usageError: null,
  };

  // -- small DOM helpers ------------------------------------------------------------------------------

  const $ = (selector) => document.querySelector(selector);

  function h(tag, attrs, ...children) {
    const node = document.createElement(tag);
    setAttrs(node, attrs);
    node.append(...children.flat().filter((c) => c !== null && c !== undefined && c !== false));
    return node;
  }

  function s(tag, attrs, ...children) {
    const node = document.createElementNS(SVG_NS, tag);
    setAttrs(node, attrs);
    node.append(...children.flat().filter((c) => c !== null && c !== undefined && c !== false));
    return node;
  }

  function setAttrs(node, attrs) {
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === 'class') node.setAttribute('class', value);
      else if (key.startsWith('on') && typeof value === 'function') node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value === true ? '' : String(value));
    }
  }

  function emptyState(title, detail) {
    return h('p', { class: 'empty', 'data-empty': '' }, h('strong', {}, title), detail || '');
  }

  // What a panel shows after its load failed (the error itself is listed at the top of the page).
  function unavailable(label) {
    return emptyState(`${label} unavailable`, 'See the error above; use Refresh to try again.');
  }

  // A scrollable table with a header row of column titles `head` and the body rows `rows` (tr elements).
  function dataTable(head, rows) {
    return h('div', { class: 'table-wrap' },
      h('table', {}, h('thead', {}, h('tr', {}, head.map((t) => h('th', { scope: 'col' }, t)))), h('tbody', {}, rows)));
  }

  // -- formatting -------------------------------------------------------------------------------------

  const isNum = (v) => typeof v === 'number' && Number.isFinite(v);
  const fmtInt = (v) => (isNum(v) ? Math.round(v).toLocaleString('en-US') : '—');
  const fmtPct = (v, digits = 0) => (isNum(v) ? `${(v * 100).toFixed(digits)}%` : '—');
  const fmtNum = (v, digits = 2) => (isNum(v) ? v.toFixed(digits) : '—');
  // Small costs keep two significant digits ($0.00042), larger ones cents.
  const fmtUsd = (v) => (isNum(v) ? `$${v >= 0.01 ? v.toFixed(2) : v.toPrecision(2)}` : '—');
  const dayMs = (day) => Date.parse(`${day}T00:00:00Z`);
  const dayFmt = new Intl.DateTimeFormat('en-US', { month: 'short', day: 'numeric', timeZone: 'UTC' });
  const fmtDay = (ms) => dayFmt.format(new Date(ms));
  const fullDayFmt = new Intl.DateTimeFormat('en-US', {
    weekday: 'short', month: 'short', day: 'numeric', year: 'numeric', timeZone: 'UTC',
  });

  // -- API --------------------------------------------------------------------------------------------

  class ApiError extends Error {
    constructor(message, status) {
      super(message);
      this.status = status;
    }
  }

  // In keyed mode the dashboard needs the organisation's API key: open /dashboard#key=<key>. The fragment never
  // reaches the server or its logs; the key is kept for this tab only.
  const fragmentKey = new URLSearchParams(window.location.hash.slice(1)).get('key');
  if (fragmentKey) {
    sessionStorage.setItem('reflexio-api-key', fragmentKey);
    history.replaceState(null, '', window.location.pathname + window.location.search);
  }

  function headersFor(body) {
    const headers = body === undefined ? {} : { 'Content-Type': 'application/json' };
    const key = sessionStorage.getItem('reflexio-api-key');
    if (key) headers.Authorization = `Bearer ${key}`;
    return headers;
  }

  async function api(method, path, body) {
    let response;
    try {
      response = await fetch(path, {
        method,
        cache: 'no-store',
        headers: headersFor(body),
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch (err) {
      throw new ApiError(`${method} ${path}: the service did not answer (${err.message})`, 0);
    }
    const text = await response.text();
    let data = null;
    try {
      data = text ? JSON.parse(text) : null;
    } catch (_) {
      data = null;
    }
    if (response.status === 401) {
      throw new ApiError('this service requires an API key: open /dashboard#key=<your key>', 401);
    }
    if (!response.ok || !data || data.success === false) {
      let detail = data && (data.msg || data.message);
      if (!detail && data && data.detail) {
        detail = typeof data.detail === 'string' ? data.detail : JSON.stringify(data.detail);
      }
      if (!detail) detail = text ? text.slice(0, 200) : response.statusText || 'no response body';
      throw new ApiError(`${method} ${path} failed (HTTP ${response.status}): ${detail}`, response.status);
    }
    return data;
  }

  // -- errors and notices -----------------------------------------------------------------------------

  function showError(key, message) {
    const host = $('#errors');
    let item = host.querySelector(`[data-error-key="${key}"]`);
    if (!item) {
      item = h('div', { class: 'error', 'data-error-key': key, 'data-testid': 'error' },
        h('span', { class: 'error-text' }),
        h('button', { type: 'button', 'aria-label': 'Dismiss', title: 'Dismiss', onclick: () => item.remove() }, '×'));
      host.append(item);
    }
    item.querySelector('.error-text').textContent = message;
  }

  function clearError(key) {
    const item = $('#errors').querySelector(`[data-error-key="${key}"]`);
    if (item) item.remove();
  }

  let toastTimer = null;
  function toast(message) {
    const node = $('#toast');
    node.textContent = message;
    node.classList.add('show');
    clearTimeout(toastTimer);
    toastTimer = setTimeout(() => node.classList.remove('show'), 4000);
  }

  // -- tooltip ----------------------------------------------------------------------------------------

  function attachTooltip(node, lines) {
    node.setAttribute('aria-label', lines.join(', '));
    node.addEventListener('pointerenter', (event) => {
      const tip = $('#tooltip');
      tip.replaceChildren(h('strong', {}, lines[0]), ...lines.slice(1).map((line) => h('div', { class: 't-dim' }, line)));
      tip.hidden = false;
      placeTooltip(event);
    });
    node.addEventListener('pointermove', placeTooltip);
    node.addEventListener('pointerleave', () => { $('#tooltip').hidden = true; });
  }

  function placeTooltip(event) {
    const tip = $('#tooltip');
    const pad = 14;
    let left = event.pageX + pad;
    const width = tip.offsetWidth;
    if (left + width > window.scrollX + document.documentElement.clientWidth - 8) left = event.pageX - width - pad;
    tip.style.left = `${Math.max(8, left)}px`;
    tip.style.top = `${event.pageY + pad}px`;
  }

  // -- scales -----------------------------------------------------------------------------------------

  function niceStep(span, count) {
    const raw = span / Math.max(1, count);
    const power = 10 ** Math.floor(Math.log10(raw));
    const unit = raw / power;
    return (unit >= 5 ? 10 : unit >= 2 ? 5 : unit >= 1 ? 2 : 1) * power;
  }

  function niceMax(value) {
    if (!isNum(value) || value <= 0) return 1;
    const step = niceStep(value, 4);
    return Math.ceil((value * 1.08) / step) * step;
  }

  function ticks(lo, hi, count) {
    const step = niceStep(hi - lo, count);
    const out = [];
    for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(+v.toFixed(10));
    return out;
  }

  function chartWidth(host, fallback) {
    return Math.max(280, Math.floor(host.clientWidth || fallback));
  }

  // -- line chart: one series per agent version, optional confidence band -----------------------------

  /**
   * series: [{name, color, points: [{x: ms, y, lo?, hi?, tip: [lines]}]}]; a null y breaks the line.
   * options: {label, yMax?, yFormat, band, height, emptyTitle, emptyDetail, yTitle}
   */
  function lineChart(host, series, options) {
    host.replaceChildren();
    const plotted = series.flatMap((ser) => ser.points.filter((p) => isNum(p.y)));
    if (!plotted.length) {
      host.append(emptyState(options.emptyTitle, options.emptyDetail));
      return;
    }
    const W = chartWidth(host, 640);
    const H = options.height || 260;
    const m = { top: 12, right: 18, bottom: 30, left: 46 };
    const xsAll = plotted.map((p) => p.x);
    let x0 = Math.min(...xsAll);
    let x1 = Math.max(...xsAll);
    const padX = Math.max(DAY_MS * 0.35, (x1 - x0) * 0.03);
    x0 -= padX;
    x1 += padX;
    const yTop = options.yMax !== undefined
      ? options.yMax
      : niceMax(Math.max(...plotted.map((p) => Math.max(p.y, isNum(p.hi) ? p.hi : p.y))));
    const y0 = 0;
    const sx = (t) => m.left + ((t - x0) / (x1 - x0)) * (W - m.left - m.right);
    const sy = (v) => H - m.bottom - ((Math.min(Math.max(v, y0), yTop) - y0) / (yTop - y0)) * (H - m.top - m.bottom);

    const svg = s('svg', {
      width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': options.label,
    });

    // Horizontal grid and y labels.
    const grid = s('g', { 'aria-hidden': 'true' });
    for (const v of ticks(y0, yTop, 4)) {
      grid.append(
        s('line', { x1: m.left, x2: W - m.right, y1: sy(v), y2: sy(v), stroke: v === 0 ? '#cfd6e0' : '#edf0f4' }),
        s('text', { x: m.left - 8, y: sy(v) + 4, 'text-anchor': 'end' }, options.yFormat(v)),
      );
    }
    // X labels: at most ~8 days, evenly thinned.
    const days = [...new Set(xsAll)].sort((a, b) => a - b);
    const maxLabels = Math.max(2, Math.floor((W - m.left - m.right) / 70));
    const every = Math.ceil(days.length / maxLabels);
    days.forEach((d, i) => {
      if (i % every !== 0 && i !== days.length - 1) return;
      if (i === days.length - 1 && i % every !== 0 && days.length > 1 && sx(d) - sx(days[i - (i % every)]) < 55) return;
      grid.append(s('text', { x: sx(d), y: H - m.bottom + 18, 'text-anchor': 'middle' }, fmtDay(d)));
    });
    svg.append(grid);

    for (const ser of series) {
      const group = s('g', { 'data-series': ser.name, class: 'series' });
      const segments = [];
      let current = [];
      for (const p of [...ser.points].sort((a, b) => a.x - b.x)) {
        if (isNum(p.y)) current.push(p);
        else if (current.length) { segments.push(current); current = []; }
      }
      if (current.length) segments.push(current);

      if (options.band) {
        for (const seg of segments) {
          const withCi = seg.filter((p) => isNum(p.lo) && isNum(p.hi));
          if (!withCi.length) continue;
          if (withCi.length === 1) {  // a single day: draw a whisker instead of an area
            const p = withCi[0];
            group.append(s('line', {
              x1: sx(p.x), x2: sx(p.x), y1: sy(p.lo), y2: sy(p.hi), stroke: ser.color, 'stroke-opacity': 0.35,
              'stroke-width': 6, 'stroke-linecap': 'round', 'data-band': '',
            }));
            continue;
          }
          const upper = withCi.map((p) => `${sx(p.x).toFixed(1)},${sy(p.hi).toFixed(1)}`);
          const lower = withCi.slice().reverse().map((p) => `${sx(p.x).toFixed(1)},${sy(p.lo).toFixed(1)}`);
          group.append(s('polygon', {
            points: [...upper, ...lower].join(' '), fill: ser.color, 'fill-opacity': 0.13, stroke: 'none', 'data-band': '',
          }));
        }
      }
      for (const seg of segments) {
        if (seg.length < 2) continue;
        const d = seg.map((p, i) => `${i ? 'L' : 'M'}${sx(p.x).toFixed(1)},${sy(p.y).toFixed(1)}`).join(' ');
        group.append(s('path', {
          d, fill: 'none', stroke: ser.color, 'stroke-width': 2.25, 'stroke-linejoin': 'round', 'stroke-linecap': 'round',
          'data-line': '',
        }));
      }
      for (const p of segments.flat()) {
        const dot = s('circle', {
          cx: sx(p.x).toFixed(1), cy: sy(p.y).toFixed(1), r: 3.75, fill: '#fff', stroke: ser.color, 'stroke-width': 2,
          'data-point': '', 'data-series': ser.name, 'data-x': p.day, 'data-y': p.y,
        });
        attachTooltip(dot, p.tip);
        group.append(dot);
      }
      svg.append(group);
    }
    host.append(svg);
  }

  // -- bar chart --------------------------------------------------------------------------------------

  /**
   * bars: [{key, label, value, color, sub, tip: [lines]}]; a null value draws no bar but keeps the slot.
   * options: {label, yMax?, yFormat, valueFormat, refLine?: {value, label}, height, emptyTitle, emptyDetail}
   */
  function barChart(host, bars, options) {
    host.replaceChildren();
    if (!bars.some((b) => isNum(b.value))) {
      host.append(emptyState(options.emptyTitle, options.emptyDetail));
      return;
    }
    const W = chartWidth(host, 480);
    const H = options.height || 260;
    const m = { top: 22, right: 14, bottom: 44, left: 46 };
    const yTop = options.yMax !== undefined ? options.yMax : niceMax(Math.max(...bars.map((b) => b.value || 0)));
    const sy = (v) => H - m.bottom - (Math.min(Math.max(v, 0), yTop) / yTop) * (H - m.top - m.bottom);
    const slot = (W - m.left - m.right) / bars.length;
    const barW = Math.min(84, slot * 0.56);

    const svg = s('svg', { width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': options.label });
    const grid = s('g', { 'aria-hidden': 'true' });
    for (const v of ticks(0, yTop, 4)) {
      grid.append(
        s('line', { x1: m.left, x2: W - m.right, y1: sy(v), y2: sy(v), stroke: v === 0 ? '#cfd6e0' : '#edf0f4' }),
        s('text', { x: m.left - 8, y: sy(v) + 4, 'text-anchor': 'end' }, options.yFormat(v)),
      );
    }
    svg.append(grid);

    bars.forEach((bar, i) => {
      const cx = m.left + slot * (i + 0.5);
      const group = s('g', { 'data-series': bar.key });
      if (isNum(bar.value)) {
        const top = sy(bar.value);
        const rect = s('rect', {
          x: (cx - barW / 2).toFixed(1), y: top.toFixed(1), width: barW.toFixed(1),
          height: Math.max(1, sy(0) - top).toFixed(1), rx: 4, fill: bar.color,
          'data-bar': '', 'data-series': bar.key, 'data-value': bar.value,
        });
        attachTooltip(rect, bar.tip);
        group.append(rect, s('text', { x: cx, y: top - 6, 'text-anchor': 'middle', class: 'bar-value' },
          options.valueFormat(bar.value)));
      } else {
        group.append(s('text', { x: cx, y: sy(0) - 8, 'text-anchor': 'middle', class: 'ref-label' }, 'no data'));
      }
      group.append(
        s('text', { x: cx, y: H - m.bottom + 17, 'text-anchor': 'middle', class: 'bar-label' }, bar.label),
        s('text', { x: cx, y: H - m.bottom + 32, 'text-anchor': 'middle' }, bar.sub || ''),
      );
      svg.append(group);
    });

    if (options.refLine) {
      const y = sy(options.refLine.value);
      svg.append(s('g', { 'aria-hidden': 'true' },
        s('line', { x1: m.left, x2: W - m.right, y1: y, y2: y, stroke: '#8a94a3', 'stroke-dasharray': '5 4', 'stroke-width': 1.25 }),
        s('text', { x: W - m.right, y: y - 5, 'text-anchor': 'end', class: 'ref-label' }, options.refLine.label)));
    }
    host.append(svg);
  }

  // -- sparkline (summary cards) ----------------------------------------------------------------------

  function sparkline(points, color) {
    const W = 104;
    const H = 34;
    const values = points.map((p) => p.value).filter(isNum);
    const svg = s('svg', { width: W, height: H, viewBox: `0 0 ${W} ${H}`, class: 'sparkline', 'aria-hidden': 'true' });
    if (values.length < 2) return svg;
    const xs = points.map((p) => p.timestamp);
    const [x0, x1] = [Math.min(...xs), Math.max(...xs)];
    const top = Math.max(...values) || 1;
    const sx = (t) => 2 + ((t - x0) / (x1 - x0 || 1)) * (W - 4);
    const sy = (v) => H - 3 - (v / top) * (H - 6);
    const line = points.filter((p) => isNum(p.value)).map((p) => `${sx(p.timestamp).toFixed(1)},${sy(p.value).toFixed(1)}`);
    svg.append(
      s('polygon', { points: [`${sx(x0)},${H - 1}`, ...line, `${sx(x1)},${H - 1}`].join(' '), fill: color, 'fill-opacity': 0.1 }),
      s('polyline', { points: line.join(' '), fill: 'none', stroke: color, 'stroke-width': 1.75, 'stroke-linejoin': 'round' }),
    );
    return svg;
  }

  // -- metrics: versions and colours ------------------------------------------------------------------

  function indexVersions(rows) {
    const first = new Map();
    for (const row of rows) {
      const seen = first.get(row.agent_version);
      if (seen === undefined || row.day < seen) first.set(row.agent_version, row.day);
    }
    // Chronological by first evaluated day (the order versions were rolled out), then by name.
    state.versions = [...first.keys()].sort((a, b) => (first.get(a) < first.get(b) ? -1 : first.get(a) > first.get(b) ? 1 : a.localeCompare(b)));
    state.versions.forEach((v, i) => { if (!state.colors.has(v)) state.colors.set(v, PALETTE[state.colors.size % PALETTE.length]); });
  }

  const colorOf = (version) => state.colors.get(version) || PALETTE[0];

  // -- evaluations and judges: every rate says what produced it ---------------------------------------

  const SIGNALS = 'session_signals';
  const DEFAULT_EVALUATION = 'default_evaluation';
  const evaluationOf = (r) => r.evaluation_name || DEFAULT_EVALUATION; // rows from before evaluations were named
  const evaluationKey = (name, judge) => `${name} · ${judge || 'unknown'}`;

  function judgeLabel(judge) {
    if (judge === 'heuristic') return 'judge: heuristic (rule-based, not a model)';
    if (judge === 'litellm') return 'judge: LLM (litellm)';
    return judge ? `judge: ${judge}` : 'judge: not recorded';
  }

  function setJudge(name, judge, text) {
    const node = document.querySelector(`[data-judge="${name}"]`);
    if (!node) return;
    node.textContent = text || judgeLabel(judge);
    node.classList.toggle('heuristic', (judge || '') === 'heuristic' || /heuristic/.test(text || ''));
    node.dataset.judgeName = judge || '';
  }

  function splitMetrics(rows) {
    state.allMetrics = rows;
    state.signals = rows.filter((r) => r.evaluation_name === SIGNALS);
    const judged = rows.filter((r) => r.evaluation_name !== SIGNALS);
    const seen = new Map();
    for (const r of judged) {
      const key = evaluationKey(evaluationOf(r), r.judge);
      if (!seen.has(key)) seen.set(key, { key, name: evaluationOf(r), judge: r.judge || null, sessions: 0 });
      seen.get(key).sessions += r.sessions_evaluated || 0;
    }
    state.evaluations = [...seen.values()].sort((a, b) => b.sessions - a.sessions || a.key.localeCompare(b.key));
    if (!state.evaluations.some((e) => e.key === state.evaluation)) state.evaluation = state.evaluations.length ? state.evaluations[0].key : null;
    selectEvaluation(state.evaluation);
    summaryJudge();
    const select = $('#evaluation');
    select.replaceChildren(...(state.evaluations.length ? state.evaluations : [{ key: '', name: 'none yet', judge: null }])
      .map((e) => h('option', { value: e.key, selected: e.key === state.evaluation }, e.key ? `${e.name} (${judgeLabel(e.judge)})` : 'no evaluations yet')));
    select.disabled = state.evaluations.length < 2;
  }

  // The summary card's success rate is over every evaluation: name every judge behind it.
  function summaryJudge() {
    const judges = [...new Set(state.evaluations.map((e) => e.judge || 'not recorded'))].sort();
    if (!judges.length) return setJudge('summary-success', null, '');
    setJudge('summary-success', judges.length === 1 ? judges[0] : null,
      judges.length === 1 ? judgeLabel(judges[0]) : `judges: ${judges.join(', ')}`);
  }

  function selectEvaluation(key) {
    state.evaluation = key;
    const chosen = state.evaluations.find((e) => e.key === key);
    state.metrics = chosen
      ? state.allMetrics.filter((r) => r.evaluation_name !== SIGNALS && evaluationKey(evaluationOf(r), r.judge) === key)
      : [];
    const judge = chosen ? chosen.judge : null;
    setJudge('success-rate', judge, chosen ? null : '');
    setJudge('regular-win-rate', judge, chosen ? null : '');
  }

  function wilson(successes, n) {
    if (!n) return [null, null];
    const z = 1.959964;
    const p = successes / n;
    const denom = 1 + (z * z) / n;
    const centre = (p + (z * z) / (2 * n)) / denom;
    const half = (z * Math.sqrt((p * (1 - p)) / n + (z * z) / (4 * n * n))) / denom;
    return [Math.max(0, centre - half), Math.min(1, centre + half)];
  }

  function weighted(rows, valueKey, weightKey) {
    let total = 0;
    let weight = 0;
    for (const r of rows) {
      const w = r[weightKey];
      if (isNum(r[valueKey]) && isNum(w) && w > 0) { total += r[valueKey] * w; weight += w; }
    }
    return weight ? total / weight : null;
  }

  function summarise(version) {
    const rows = state.metrics.filter((r) => r.agent_version === version);
    const signals = state.signals.filter((r) => r.agent_version === version);
    const sum = (key, from = rows) => from.reduce((acc, r) => acc + (isNum(r[key]) ? r[key] : 0), 0);
    const treatedCorrections = sum('corrections', signals);
    const sessions = sum('sessions_evaluated');
    const successes = sum('successes');
    const [lo, hi] = wilson(successes, sessions);
    return {
      version,
      days: rows.length,
      sessions,
      successRate: sessions ? successes / sessions : null,
      ciLow: lo,
      ciHigh: hi,
      shadowComparisons: sum('shadow_comparisons'),
      regularWinRate: weighted(rows, 'regular_win_rate', 'shadow_comparisons'),
      corrections: weighted(rows, 'corrections_per_session', 'sessions_evaluated'),
      turns: weighted(rows, 'turns_to_resolution', 'sessions_evaluated'),
      recurrence: treatedCorrections ? sum('recurring_corrections', signals) / treatedCorrections : null,
      toolFailures: weighted(signals, 'tool_failures_per_session', 'sessions_evaluated'),
      // Approval decisions are on the session_signals rows (and on every row of lakes from before that split).
      approved: sum('playbooks_approved') + sum('playbooks_approved', signals),
      rejected: sum('playbooks_rejected') + sum('playbooks_rejected', signals),
    };
  }

  // -- rendering: impact ------------------------------------------------------------------------------

  const NO_EVALUATIONS = 'No evaluations yet';
  const NO_EVALUATIONS_DETAIL = 'Metrics appear once the evaluation pipeline has scored closed sessions.';

  function renderLegend() {
    const host = $('#legend');
    host.replaceChildren(...state.versions.map((v) => {
      const sessions = state.metrics.filter((r) => r.agent_version === v).reduce((a, r) => a + (r.sessions_evaluated || 0), 0);
      return h('span', { class: 'legend-item', 'data-legend-item': v },
        s('svg', { width: 12, height: 12, class: 'swatch', 'aria-hidden': 'true' },
          s('rect', { width: 12, height: 12, rx: 3, fill: colorOf(v) })),
        h('strong', {}, v), h('span', {}, `${fmtInt(sessions)} sessions`));
    }));
  }

  function renderImpact() {
    const success = $('#chart-success');
    const shadow = $('#chart-shadow');
    const corrections = $('#chart-corrections');
    const recurrence = $('#chart-recurrence');
    const versions = $('#versions');
    if (state.metricsError) {
      const detail = 'Impact metrics could not be loaded (see the error above).';
      for (const host of [success, shadow, corrections, recurrence, versions, $('#holdout')]) {
        host.replaceChildren(emptyState('Unavailable', detail));
      }
      $('#legend').replaceChildren();
      return;
    }
    renderLegend();
    const byVersion = (key, extra, rows = state.metrics) => state.versions.map((v) => ({
      name: v,
      color: colorOf(v),
      points: rows.filter((r) => r.agent_version === v).map((r) => ({
        x: dayMs(r.day), day: r.day, y: r[key], ...extra(r),
      })),
    })).filter((series) => series.points.length);

    lineChart(success, byVersion('success_rate', (r) => ({
      lo: r.success_ci_low,
      hi: r.success_ci_high,
      tip: [
        `${r.agent_version} · ${fullDayFmt.format(new Date(dayMs(r.day)))}`,
        `Success ${fmtPct(r.success_rate, 1)} (${fmtInt(r.successes)} of ${fmtInt(r.sessions_evaluated)} sessions)`,
        `95% interval ${fmtPct(r.success_ci_low)} – ${fmtPct(r.success_ci_high)}`,
      ],
    })), {
      label: 'Success rate per day and agent version, with 95% intervals',
      yMax: 1, yFormat: (v) => fmtPct(v), band: true, height: 280,
      emptyTitle: NO_EVALUATIONS, emptyDetail: NO_EVALUATIONS_DETAIL,
    });

    const summaries = state.versions.map(summarise);
    barChart(shadow, summaries.filter((sm) => sm.sessions).map((sm) => ({
      key: sm.version,
      label: sm.version,
      value: sm.shadowComparisons ? sm.regularWinRate : null,
      color: colorOf(sm.version),
      sub: `${fmtInt(sm.shadowComparisons)} comparisons`,
      tip: [sm.version, `The regular (live) answer won ${fmtPct(sm.regularWinRate, 1)} of decisive comparisons`,
        `${fmtInt(sm.shadowComparisons)} shadow comparisons`],
    })), {
      label: 'Regular (live) answer win rate over shadow per agent version',
      yMax: 1, yFormat: (v) => fmtPct(v), valueFormat: (v) => fmtPct(v), refLine: { value: 0.5, label: 'parity 50%' },
      emptyTitle: state.metrics.length ? 'No shadow comparisons yet' : NO_EVALUATIONS,
      emptyDetail: state.metrics.length
        ? 'Publish turns with shadow_content to compare the live answer against a candidate.'
        : NO_EVALUATIONS_DETAIL,
    });

    lineChart(corrections, byVersion('corrections_per_session', (r) => ({
      tip: [
        `${r.agent_version} · ${fullDayFmt.format(new Date(dayMs(r.day)))}`,
        `${fmtNum(r.corrections_per_session)} corrections per session`,
        `${fmtInt(r.sessions_evaluated)} sessions · ${fmtNum(r.turns_to_resolution, 1)} turns to resolution`,
      ],
    })), {
      label: 'Corrections per session per day and agent version',
      yFormat: (v) => (v % 1 ? v.toFixed(1) : String(v)),
      emptyTitle: NO_EVALUATIONS, emptyDetail: NO_EVALUATIONS_DETAIL,
    });

    lineChart(recurrence, byVersion('correction_recurrence', (r) => ({
      tip: [
        `${r.agent_version} · ${fullDayFmt.format(new Date(dayMs(r.day)))}`,
        `${fmtPct(r.correction_recurrence, 1)} of treated users' corrections repeat a served lesson`,
        `${fmtInt(r.recurring_corrections)} of ${fmtInt(r.corrections)} corrections · ${fmtInt(r.sessions_evaluated)} sessions`,
        'heuristic matching rules',
      ],
    }), state.signals), {
      label: 'Correction recurrence per day and agent version (heuristic)',
      yMax: 1, yFormat: (v) => fmtPct(v),
      emptyTitle: state.signals.length ? 'No corrections in treated sessions yet' : 'No closed sessions counted yet',
      emptyDetail: 'Recurrence appears once the evaluation job has counted the corrections of closed sessions.',
    });

    renderVersionsTable(versions, summaries);
    renderHoldout();
  }

  // -- rendering: treated vs control -------------------------------------------------------------------

  const METRIC_LABELS = {
    success_rate: 'Success rate',
    turns_to_resolution: 'Turns to resolution',
    corrections_per_session: 'Corrections per session',
    tool_failures_per_session: 'Tool failures per session',
  };
  // Which direction of the difference is an improvement.
  const HIGHER_IS_BETTER = { success_rate: true, turns_to_resolution: false, corrections_per_session: false, tool_failures_per_session: false };

  function renderHoldout() {
    const host = $('#holdout');
    const chosen = state.evaluations.find((e) => e.key === state.evaluation);
    const rows = state.holdout.filter((r) => r.evaluation_name === SIGNALS
      || (chosen && r.evaluation_name === chosen.name && (r.judge || null) === chosen.judge));
    if (!rows.length) {
      host.replaceChildren(emptyState('No holdout comparison yet',
        'It needs searches by users of both groups and their closed sessions (the control group is 5 % of users by default).'));
      return;
    }
    const isRate = (m) => m === 'success_rate';
    const fmt = (m, v) => (isRate(m) ? fmtPct(v, 1) : fmtNum(v));
    const fmtDiff = (m, v) => (isNum(v) ? `${v > 0 ? '+' : ''}${isRate(m) ? `${(v * 100).toFixed(1)} pts` : v.toFixed(2)}` : '—');
    const head = ['Agent version', 'Metric', 'Judge', 'Treated', 'Control', 'Difference (treated − control)', '95% interval', 'Period'];
    const body = rows.map((r) => {
      const better = HIGHER_IS_BETTER[r.metric];
      const clear = isNum(r.ci_low) && (r.ci_low > 0 || r.ci_high < 0);
      const good = clear && ((r.ci_low > 0) === better);
      return h('tr', { 'data-holdout-row': `${r.agent_version}:${r.metric}`, 'data-metric': r.metric },
        h('td', {}, h('span', { class: 'version-name' },
          s('svg', { width: 10, height: 10, 'aria-hidden': 'true' }, s('circle', { cx: 5, cy: 5, r: 5, fill: colorOf(r.agent_version) })),
          r.agent_version)),
        h('td', {}, METRIC_LABELS[r.metric] || r.metric),
        h('td', { 'data-field': 'judge', title: r.evaluation_name === SIGNALS ? 'rule-based signals of every closed session' : judgeLabel(r.judge) },
          r.evaluation_name === SIGNALS ? 'session signals · heuristic' : `${r.evaluation_name} · ${r.judge || 'not recorded'}`),
        h('td', { 'data-field': 'treated', 'data-value': r.treated_value }, fmt(r.metric, r.treated_value),
          h('span', { class: 'ci' }, `n=${fmtInt(r.treated_sessions)}`)),
        h('td', { 'data-field': 'control', 'data-value': r.control_value }, fmt(r.metric, r.control_value),
          h('span', { class: 'ci' }, `n=${fmtInt(r.control_sessions)}`)),
        h('td', { 'data-field': 'difference', 'data-value': r.difference, class: clear ? (good ? 'diff-good' : 'diff-bad') : 'diff-none' },
          fmtDiff(r.metric, r.difference)),
        h('td', { 'data-field': 'interval' }, isNum(r.ci_low) ? `${fmtDiff(r.metric, r.ci_low)} … ${fmtDiff(r.metric, r.ci_high)}`
          : (r.control_sessions && r.treated_sessions ? 'too few sessions' : `no ${r.control_sessions ? 'treated' : 'control'} sessions yet`),
          r.interval ? h('span', { class: 'ci' }, r.interval) : null),
        h('td', { title: r.period_start ? `${r.period_start} – ${r.period_end} (UTC days)` : '' },
          r.period_start ? `${fmtDay(dayMs(r.period_start))} – ${fmtDay(dayMs(r.period_end))}` : '—'));
    });
    host.replaceChildren(dataTable(head, body));
  }

  // -- rendering: outcome counters per learned item ----------------------------------------------------

  const ENTITY_LABELS = { profile: 'profile', user_playbook: 'user playbook', agent_playbook: 'agent playbook' };

  function renderItems() {
    const host = $('#items');
    if (state.itemsError) {
      host.replaceChildren(unavailable('Outcome counters'));
      return;
    }
    const items = state.items || [];
    if (!items.length) {
      host.replaceChildren(emptyState('No learned item has been served yet',
        'Counters appear once search has served learned items and the evaluation job has seen what followed.'));
      return;
    }
    const head = ['Item', 'Kind', 'Served', 'Helpful', 'Harmful', 'Missed', 'Status'];
    const body = items.map((item) => {
      const status = item.held_out ? 'held out pending review' : item.flagged ? 'flagged' : 'ok';
      const keep = item.flagged ? h('button', { type: 'button', class: 'btn btn-ghost', 'data-action': 'keep',
        onclick: () => keepItem(item) }, 'Keep') : null;
      return h('tr', { 'data-item-row': `${item.entity}:${item.item_id}` },
        h('td', { class: 'item-text', title: item.trigger || '' }, item.content || `#${item.item_id}`),
        h('td', {}, ENTITY_LABELS[item.entity] || item.entity),
        ...['served', 'helpful', 'harmful', 'missed'].map((f) => h('td', { 'data-field': f, 'data-value': item[f] }, fmtInt(item[f]))),
        h('td', { 'data-field': 'status' }, item.flagged ? h('span', { class: 'chip flag' }, status) : status, keep));
    });
    host.replaceChildren(h('p', { class: 'hint' }, `Counted by ${items[0].rules || 'heuristic rules'}.`),
      dataTable(head, body));
  }

  async function keepItem(item) {
    try {
      const result = await api('POST', '/api/review_flagged_item', { entity: item.entity, item_id: item.item_id });
      clearError('keep');
      toast(result.msg || `${item.entity} ${item.item_id} kept`);
    } catch (err) {
      showError('keep', `Could not keep ${item.entity} #${item.item_id}: ${err.message}`);
    }
    await loadItems();
  }

  function renderVersionsTable(host, summaries) {
    if (!summaries.length) {
      host.replaceChildren(emptyState(NO_EVALUATIONS, NO_EVALUATIONS_DETAIL));
      return;
    }
    const head = ['Agent version', 'Days', 'Sessions', 'Success rate', 'Regular win rate over shadow',
      'Corrections per session', 'Turns to resolution', 'Correction recurrence (heuristic)',
      'Tool failures per session (heuristic)', 'Playbooks approved', 'Playbooks rejected'];
    const rows = summaries.map((sm) => h('tr', { 'data-version-row': sm.version },
      h('td', {}, h('span', { class: 'version-name' },
        s('svg', { width: 10, height: 10, 'aria-hidden': 'true' }, s('circle', { cx: 5, cy: 5, r: 5, fill: colorOf(sm.version) })),
        sm.version)),
      h('td', {}, fmtInt(sm.days)),
      h('td', {}, fmtInt(sm.sessions)),
      h('td', {}, fmtPct(sm.successRate, 1),
        isNum(sm.ciLow) ? h('span', { class: 'ci' }, `${fmtPct(sm.ciLow)}–${fmtPct(sm.ciHigh)}`) : null),
      h('td', {}, sm.shadowComparisons ? fmtPct(sm.regularWinRate, 1) : '—'),
      h('td', {}, fmtNum(sm.corrections)),
      h('td', {}, fmtNum(sm.turns, 1)),
      h('td', { 'data-field': 'recurrence' }, fmtPct(sm.recurrence, 1)),
      h('td', {}, fmtNum(sm.toolFailures)),
      h('td', {}, fmtInt(sm.approved)),
      h('td', {}, fmtInt(sm.rejected)),
    ));
    host.replaceChildren(dataTable(head, rows));
  }

  // -- rendering: summary cards -----------------------------------------------------------------------

  const CARDS = [
    { key: 'total_interactions', label: 'Interactions', series: 'interactions_time_series', color: '#2f5bd3' },
    { key: 'total_profiles', label: 'Profiles learned', series: 'profiles_time_series', color: '#6b46c1' },
    { key: 'total_playbooks', label: 'Playbooks learned', series: 'playbooks_time_series', color: '#0e8a9a' },
    { key: 'success_rate', label: 'Session success rate', series: 'evaluations_time_series', color: '#17864a', percent: true },
  ];

  function renderCards() {
    const host = $('#cards');
    if (state.statsError) {
      host.replaceChildren(h('div', { class: 'card placeholder' }, 'Summary unavailable (see the error above).'));
      return;
    }
    const stats = state.stats || {};
    const cur = stats.current_period || {};
    const prev = stats.previous_period || {};
    host.replaceChildren(...CARDS.map((card) => {
      const now = cur[card.key];
      const before = prev[card.key];
      // The stats API reports success_rate in percent (0..100) and 0 when nothing was evaluated.
      const evaluatedNow = !card.percent || (stats[card.series] || []).length > 0 || now > 0;
      const value = card.percent ? (evaluatedNow && isNum(now) ? `${now.toFixed(1)}%` : '—') : fmtInt(now);
      return h('div', { class: 'card', 'data-card': card.key },
        h('span', { class: 'card-label' }, card.label,
          card.percent ? h('span', { class: 'judge', 'data-judge': 'summary-success' }) : null),
        h('span', { class: 'card-value', 'data-value': '' }, value),
        h('div', { class: 'card-foot' }, delta(now, before, card.percent, evaluatedNow),
          sparkline(stats[card.series] || [], card.color)));
    }));
    summaryJudge();
  }

  function delta(now, before, percent, evaluatedNow) {
    const prevText = percent ? (before ? `${before.toFixed(1)}%` : '—') : fmtInt(before);
    const prev = h('span', { class: 'prev' }, `previous ${prevText}`);
    if (!isNum(now) || !isNum(before) || (percent && !evaluatedNow)) return h('span', { class: 'delta flat' }, 'no data', prev);
    if (now === before) return h('span', { class: 'delta flat' }, now ? 'no change' : 'none yet', prev);
    const up = now > before;
    let text;
    if (percent) text = before ? `${up ? '▲' : '▼'} ${Math.abs(now - before).toFixed(1)} pts` : 'new this period';
    else if (!before) text = 'new this period';
    else text = `${up ? '▲' : '▼'} ${Math.abs(((now - before) / before) * 100).toFixed(0)}%`;
    return h('span', { class: `delta ${up ? 'up' : 'down'}` }, text, prev);
  }

  // -- rendering: LLM usage ---------------------------------------------------------------------------

  const NO_COST = "n/a: model not in LiteLLM's cost map";
  const nCalls = (n) => `${fmtInt(n)} ${n === 1 ? 'call' : 'calls'}`;

  // One cell: the per-1k-turns figure, the day's total beside it in grey.
  function usageCell(field, perThousand, total, format) {
    return h('td', { 'data-field': field, 'data-value': isNum(perThousand) ? perThousand : null },
      h('span', { class: 'per-1k' }, format(perThousand)), h('span', { class: 'ci' }, total));
  }

  function costCell(day) {
    if (!day.calls) return h('td', { 'data-field': 'cost_usd_per_1k_turns' }, '—');
    if (!isNum(day.cost_usd)) {
      return h('td', { 'data-field': 'cost_usd_per_1k_turns', class: 'no-cost', title: day.models_without_cost.join(', ') },
        NO_COST);
    }
    const cell = usageCell('cost_usd_per_1k_turns', day.cost_usd_per_1k_turns, `${fmtUsd(day.cost_usd)} total`, fmtUsd);
    if (day.calls_without_cost) {  // a lower bound: some calls had no price
      cell.append(h('div', { class: 'ci no-cost', title: day.models_without_cost.join(', ') },
        `+ ${nCalls(day.calls_without_cost)} ${NO_COST}`));
    }
    return cell;
  }

  function renderExtractor() {
    const e = state.extractor;
    const host = $('#extractor');
    if (!e) { host.replaceChildren(); return; }
    const measured = e.precision == null ? '' :
      ` — lasting kinds on its development split: precision ${fmtNum(e.precision, 2)}, recall ${fmtNum(e.recall, 2)}`;
    host.replaceChildren(`Learning with ${e.name} (${e.model}): ${e.kind}${measured}.`);
    host.classList.toggle('heuristic', /heuristic/.test(e.kind));
  }

  function renderUsage() {
    renderExtractor();
    const host = $('#usage');
    if (state.usageError) {
      host.replaceChildren(unavailable('LLM usage'));
      return;
    }
    const days = (state.usage || []).filter((d) => d.calls || d.turns).slice().reverse();  // newest first
    if (!days.some((d) => d.calls)) {
      host.replaceChildren(emptyState('No LLM calls recorded yet',
        'Rows appear once a pipeline run with an LLM model (REFLEXIO_LLM_MODEL) has made calls.'));
      return;
    }
    const head = ['Day', 'Turns', 'Calls per 1k turns', 'Tokens per 1k turns (prompt + completion)',
      'Cost per 1k turns', 'Failed attempts'];
    const rows = days.map((d) => h('tr', { 'data-usage-day': d.day },
      h('td', {}, fullDayFmt.format(new Date(dayMs(d.day)))),
      h('td', { 'data-field': 'turns', 'data-value': d.turns }, fmtInt(d.turns)),
      usageCell('calls_per_1k_turns', d.calls_per_1k_turns, nCalls(d.calls), (v) => fmtNum(v, 1)),
      usageCell('tokens_per_1k_turns', d.tokens_per_1k_turns,
        `${fmtInt(d.prompt_tokens)} + ${fmtInt(d.completion_tokens)}`, fmtInt),
      costCell(d),
      h('td', { 'data-field': 'failed_calls', 'data-value': d.failed_calls }, fmtInt(d.failed_calls),
        d.calls ? h('span', { class: 'ci' }, fmtPct(d.failed_calls / d.calls)) : null),
    ));
    host.replaceChildren(dataTable(head, rows));
  }

  // -- rendering: approval queue ----------------------------------------------------------------------

  function renderQueue() {
    const host = $('#queue');
    const badge = $('#queue-count');
    if (state.queueError) {
      host.replaceChildren(unavailable('Approval queue'));
      badge.textContent = '?';
      return;
    }
    const items = state.queue || [];
    badge.textContent = String(items.length);
    badge.classList.toggle('zero', items.length === 0);
    if (!items.length) {
      host.replaceChildren(emptyState('Nothing waiting for review',
        'New agent playbooks appear here after the aggregation job consolidates user playbooks.'));
      return;
    }
    host.replaceChildren(...items.map(queueRow));
  }

  function queueRow(item) {
    const id = item.agent_playbook_id;
    const row = h('article', { class: 'queue-item', 'data-testid': 'queue-row', 'data-playbook-id': id });
    const approve = h('button', { type: 'button', class: 'btn btn-approve', 'data-action': 'approve' }, 'Approve');
    const reject = h('button', { type: 'button', class: 'btn btn-reject', 'data-action': 'reject' }, 'Reject');
    approve.addEventListener('click', () => decide(item, 'approved', row));
    reject.addEventListener('click', () => decide(item, 'rejected', row));
    const users = item.member_user_count;
    const supporters = item.supporting_user_ids || [];
    const meta = h('dl', { class: 'queue-meta' });
    if (item.trigger) meta.append(h('dt', {}, 'When'), h('dd', {}, item.trigger));
    if (item.rationale) meta.append(h('dt', {}, 'Why'), h('dd', {}, item.rationale));
    // Who taught it: a reviewer can tell one person's (or one attacker's) accounts from independent users.
    if (supporters.length) {
      meta.append(h('dt', {}, 'Supported by'), h('dd', { 'data-field': 'supporters' }, supporters.join(', ')));
    }
    if (item.flag_reason) meta.append(h('dt', {}, 'Flagged'), h('dd', { 'data-field': 'flag' }, item.flag_reason));
    row.append(
      h('div', {},
        h('div', { class: 'queue-title' },
          h('h3', {}, item.playbook_name || 'playbook'),
          h('span', { class: 'chip' },
            s('svg', { width: 8, height: 8, 'aria-hidden': 'true' }, s('circle', { cx: 4, cy: 4, r: 4, fill: colorOf(item.agent_version) })),
            item.agent_version || 'any version'),
          isNum(users) ? h('span', { class: 'chip' }, `${users} ${users === 1 ? 'user' : 'users'}`) : null,
          item.flag_reason ? h('span', { class: 'chip warn', 'data-testid': 'queue-flag', title: item.flag_reason },
            'flagged for review') : null,
          item.blocking_issue ? h('span', { class: 'chip warn', title: item.blocking_issue.details || '' },
            `blocked: ${item.blocking_issue.kind}`) : null,
          h('span', { class: 'muted small' }, `#${id}`)),
        h('p', { class: 'queue-content', 'data-field': 'content' }, item.content || ''),
        meta.childElementCount ? meta : null),
      h('div', { class: 'queue-actions' }, approve, reject));
    return row;
  }

  async function decide(item, status, row) {
    const id = item.agent_playbook_id;
    const name = item.playbook_name || 'playbook';
    row.classList.add('busy');
    row.querySelectorAll('button').forEach((b) => { b.disabled = true; });
    try {
      const result = await api('PUT', '/api/update_agent_playbook_status', { agent_playbook_id: id, playbook_status: status });
      clearError('decision');
      toast(result.msg || `Playbook #${id} is now ${status}`);
    } catch (err) {
      const verb = status === 'approved' ? 'approve' : 'reject';
      showError('decision', `Could not ${verb} “${name}” (#${id}): ${err.message}`);
    }
    await loadQueue();  // decided rows leave the queue; a row another reviewer decided (or removed) goes too
  }

  // -- loading ----------------------------------------------------------------------------------------

  // One panel's load: `fetchInto` asks the API and keeps the answer in `state`; a failure is kept as
  // `state[<key>Error]` and shown in the error list under `key` until a later load succeeds. The panel is rendered
  // either way, so a failed refresh shows its "unavailable" state instead of stale rows.
  async function loadPanel(key, label, fetchInto, render) {
    try {
      await fetchInto();
      state[`${key}Error`] = null;
      clearError(key);
    } catch (err) {
      state[`${key}Error`] = err;
      showError(key, `${label}: ${err.message}`);
    }
    render();
  }

  async function loadMetrics() {
    await loadPanel('metrics', 'Impact metrics', async () => {
      const data = await api('GET', '/api/impact_metrics');
      const rows = (data.metrics || []).filter((r) => r && r.agent_version && r.day);
      state.holdout = data.holdout || [];
      state.metricsMsg = data.msg || '';
      indexVersions([...rows, ...state.holdout.map((r) => ({ agent_version: r.agent_version, day: r.period_start || '9999' }))]);
      splitMetrics(rows);
      if (state.queue) renderQueue();  // its version chips use the versions' colours
    }, renderImpact);
  }

  async function loadStats() {
    const daysBack = Number($('#period').value) || 30;
    $('#period-label').textContent = `· last ${daysBack} days vs the ${daysBack} before`;
    await loadPanel('stats', 'Summary', async () => {
      state.stats = (await api('POST', '/api/get_dashboard_stats', { days_back: daysBack })).stats || {};
    }, renderCards);
  }

  async function loadUsage() {
    const days = Number($('#period').value) || 30;
    $('#usage-period').textContent = `· last ${days} days`;
    await loadPanel('usage', 'LLM usage', async () => {
      const data = await api('GET', `/api/llm_usage?days=${days}`);
      state.usage = data.days || [];
      state.extractor = data.extractor || null;
    }, renderUsage);
  }

  async function loadQueue() {
    await loadPanel('queue', 'Approval queue', async () => {
      const body = { playbook_status_filter: 'pending', limit: 500 };
      state.queue = (await api('POST', '/api/get_agent_playbooks', body)).agent_playbooks || [];
    }, renderQueue);
  }

  async function loadItems() {
    await loadPanel('items', 'Outcome counters', async () => {
      state.items = (await api('GET', '/api/item_outcomes?limit=50')).items || [];
    }, renderItems);
  }

  function renderQuarantine() {
    const host = $('#quarantine');
    if (state.quarantineError) {
      host.replaceChildren(unavailable('Quarantine'));
      return;
    }
    const files = state.quarantine || [];
    if (!files.length) {
      host.replaceChildren(emptyState('No file quarantined', 'Every landing and table file read so far was readable.'));
      return;
    }
    const head = ['File', 'Kind', 'Quarantined', 'Size', 'Error', 'Status'];
    const body = files.map((f) => h('tr', { 'data-quarantine-row': f.original_path },
      h('td', { class: 'item-text', title: f.quarantine_path }, f.original_path),
      h('td', {}, f.kind === 'table' ? `table ${f.table_name}` : 'landing'),
      h('td', {}, new Date(f.quarantined_at_us / 1000).toISOString().replace('T', ' ').slice(0, 19)),
      h('td', {}, `${fmtInt(f.size_bytes)} B`),
      h('td', { class: 'item-text' }, f.error),
      h('td', { 'data-field': 'status' }, f.status === 'erased' ? 'deleted by an erasure' : 'kept')));
    host.replaceChildren(dataTable(head, body));
  }

  async function loadQuarantine() {
    await loadPanel('quarantine', 'Quarantine', async () => {
      state.quarantine = (await api('GET', '/api/quarantine')).files || [];
    }, renderQuarantine);
  }

  async function loadAll() {
    const button = $('#refresh');
    button.disabled = true;
    await Promise.allSettled([loadMetrics(), loadStats(), loadUsage(), loadQueue(), loadItems(), loadQuarantine()]);
    button.disabled = false;
    $('#updated').textContent = `Updated ${new Date().toLocaleTimeString('en-GB')}`;
    document.body.dataset.ready = 'true';
  }

  function start() {
    $('#refresh').addEventListener('click', loadAll);
    $('#evaluation').addEventListener('change', (event) => {
      selectEvaluation(event.target.value);
      renderImpact();
    });
    $('#period').addEventListener('change', () => Promise.allSettled([loadStats(), loadUsage()]));
    let resizeTimer = null;
    let lastWidth = window.innerWidth;
    window.addEventListener('resize', () => {
      if (window.innerWidth === lastWidth) return;
      lastWidth = window.innerWidth;
      clearTimeout(resizeTimer);
      resizeTimer = setTimeout(renderImpact, 150);
    });
    loadAll();
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
  else start();
})();
