// A time-series line chart drawn as inline SVG, redrawn whole on every update: a few hundred
// points at most, so there is nothing to gain from patching the old drawing.

import { el, svgEl } from './dom.js';

const WIDTH = 560;
const HEIGHT = 180;
const PAD = { left: 56, right: 14, top: 12, bottom: 26 };

export class LineChart {
  // format: value → axis and caption text. fixedMax: the top of the y axis (a ratio's 1), else it
  // follows the data.
  constructor({ name, title, format, fixedMax = null, windowSeconds = 300, note = '' }) {
    this.format = format;
    this.fixedMax = fixedMax;
    this.windowMs = windowSeconds * 1000;
    this.titleNode = el('span', { class: 'chart-title', text: title });
    this.valueNode = el('span', { class: 'chart-value' });
    this.noteNode = el('p', { class: 'chart-note', text: note, hidden: !note });
    this.svg = svgEl('svg', { viewBox: `0 0 ${WIDTH} ${HEIGHT}`, role: 'img', 'aria-label': title });
    this.element = el('figure', { class: 'chart', 'data-chart': name }, el('figcaption', {}, this.titleNode, this.valueNode), this.svg, this.noteNode);
  }

  setTitle(title, note = '') {
    this.titleNode.textContent = title;
    this.svg.setAttribute('aria-label', title);
    this.noteNode.textContent = note;
    this.noteNode.hidden = !note;
  }

  // points: [{t: ms since the epoch, v: number or null}], oldest first; null leaves a gap (an
  // interval in which the value is not defined, such as a ratio with no requests).
  update(points, now = Date.now()) {
    const start = now - this.windowMs;
    const shown = points.filter((p) => p.t >= start);
    const values = shown.map((p) => p.v).filter((v) => typeof v === 'number');
    const last = [...shown].reverse().find((p) => typeof p.v === 'number');
    this.valueNode.textContent = last ? this.format(last.v) : '';

    const max = this.fixedMax ?? niceCeiling(Math.max(0, ...values));
    const plotW = WIDTH - PAD.left - PAD.right;
    const plotH = HEIGHT - PAD.top - PAD.bottom;
    const x = (t) => PAD.left + ((t - start) / this.windowMs) * plotW;
    const y = (v) => PAD.top + plotH - (Math.min(v, max) / max) * plotH;

    const parts = [];
    for (const fraction of [0, 0.5, 1]) {
      const gy = y(max * fraction);
      parts.push(svgEl('line', { class: 'grid', x1: PAD.left, x2: WIDTH - PAD.right, y1: gy, y2: gy }));
      parts.push(svgEl('text', { class: 'axis-label', x: PAD.left - 6, y: gy + 4, 'text-anchor': 'end' }, this.format(max * fraction)));
    }
    const minutes = this.windowMs / 60000;
    for (const [fraction, label] of [[0, `−${minutes} min`], [0.5, `−${minutes / 2} min`], [1, 'now']]) {
      const anchor = fraction === 0 ? 'start' : fraction === 1 ? 'end' : 'middle';
      parts.push(svgEl('text', { class: 'axis-label', x: PAD.left + fraction * plotW, y: HEIGHT - 6, 'text-anchor': anchor }, label));
    }

    if (!values.length) {
      parts.push(svgEl('text', { class: 'chart-empty', x: PAD.left + plotW / 2, y: PAD.top + plotH / 2, 'text-anchor': 'middle' }, 'waiting for data'));
    }
    for (const run of runs(shown)) {
      const coords = run.map((p) => `${x(p.t).toFixed(1)},${y(p.v).toFixed(1)}`);
      if (run.length === 1) {
        parts.push(svgEl('circle', { class: 'point', cx: x(run[0].t), cy: y(run[0].v), r: 2.5 }));
        continue;
      }
      const baseline = y(0).toFixed(1);
      const area = `M${x(run[0].t).toFixed(1)},${baseline} L${coords.join(' L')} L${x(run.at(-1).t).toFixed(1)},${baseline} Z`;
      parts.push(svgEl('path', { class: 'area', d: area }));
      parts.push(svgEl('path', { class: 'line', d: `M${coords.join(' L')}` }));
    }
    if (last) parts.push(svgEl('circle', { class: 'point', cx: x(last.t), cy: y(last.v), r: 3 }));
    this.svg.replaceChildren(...parts);
  }
}

// Consecutive points that have values: each is drawn as one line.
function runs(points) {
  const out = [];
  let current = [];
  for (const p of points) {
    if (typeof p.v === 'number') {
      current.push(p);
    } else if (current.length) {
      out.push(current);
      current = [];
    }
  }
  if (current.length) out.push(current);
  return out;
}

// 1, 2 or 5 times a power of ten, at least the value: axis labels stay round numbers.
function niceCeiling(value) {
  if (value <= 0) return 1;
  const power = 10 ** Math.floor(Math.log10(value));
  for (const step of [1, 2, 5, 10]) {
    if (step * power >= value) return step * power;
  }
  return 10 * power;
}
