// The explorers of posenc_core.book.widgets, computed and drawn in the reader's browser.
//
// One ES module for every explorer (anywidget loads it: `export default { render }`). The
// widget's `spec` says which explorer it is, its controls and its constants; `values` holds the
// controls' values and is synced with Python when a kernel is attached. Nothing here needs a
// kernel: the static book renders the saved widget state and this module does the rest.
//
// Part 1 holds the formulas, each named after the posenc_core function it mirrors and written in
// float64 (JavaScript numbers); tests/built/test_explorers.py compares what they give, in the
// page, with posenc_core computed in Python. Part 2 draws on a <canvas>; part 3 builds the
// controls; part 4 is one entry per explorer: compute, label, draw.

// --------------------------------------------------------------------------- 1. formulas

const TAU = 2 * Math.PI;

// theta_i = base ** (-2i / d), i = 0 .. d/2 - 1 (posenc_core.sinusoidal.sinusoidal_frequencies)
export function sinusoidal_frequencies(d, base) {
  if (!Number.isInteger(d) || d < 2 || d % 2) throw new RangeError(`d must be an even integer >= 2, got ${d}`);
  const out = new Float64Array(d / 2);
  for (let i = 0; i < d / 2; i++) out[i] = Math.pow(base, -(2 * i) / d);
  return out;
}

// 2 pi / theta_i (sinusoidal_wavelengths)
export function sinusoidal_wavelengths(d, base) {
  return sinusoidal_frequencies(d, base).map((w) => TAU / w);
}

// rows p = 0 .. n-1 of sin(p w_i), cos(p w_i) interleaved (sinusoidal_table, float64)
export function sinusoidal_table(n, d, base) {
  const w = sinusoidal_frequencies(d, base);
  const rows = [];
  for (let p = 0; p < n; p++) {
    const row = new Float64Array(d);
    for (let i = 0; i < d / 2; i++) {
      row[2 * i] = Math.sin(p * w[i]);
      row[2 * i + 1] = Math.cos(p * w[i]);
    }
    rows.push(row);
  }
  return rows;
}

// mean_i cos(k w_i) for every offset k (posenc_core.analysis.sinusoidal_similarity)
export function sinusoidal_similarity(offsets, d, base) {
  const w = sinusoidal_frequencies(d, base);
  return Float64Array.from(offsets, (k) => {
    let s = 0;
    for (let i = 0; i < w.length; i++) s += Math.cos(k * w[i]);
    return s / w.length;
  });
}

// the 2x2 block of pair i of M_k, PE(p + k) = M_k PE(p) (posenc_core.rotation.shift_matrix)
export function shift_matrix_block(k, d, base, i) {
  const a = sinusoidal_frequencies(d, base)[i] * k;
  const c = Math.cos(a);
  const s = Math.sin(a);
  return [
    [c, s],
    [-s, c],
  ];
}

function ntk_base(base, d, ratio) {
  if (d <= 2) throw new RangeError(`NTK scaling needs d > 2 (exponent d / (d - 2)), got ${d}`);
  return base * Math.pow(ratio, d / (d - 2));
}

// theta_i after a scaling dict {rope_type, factor, ...} (posenc_core.rope.rope_frequencies)
export function rope_frequencies(d, base, scaling, seq_len) {
  const inv = sinusoidal_frequencies(d, base);
  if (!scaling) return inv;
  const s = scaling.factor;
  const l0 = scaling.original_max_position_embeddings;
  switch (scaling.rope_type) {
    case "linear":
      return inv.map((t) => t / s);
    case "ntk":
      return sinusoidal_frequencies(d, ntk_base(base, d, s));
    case "dynamic": {
      const length = seq_len == null ? l0 : Math.max(seq_len, l0);
      return sinusoidal_frequencies(d, ntk_base(base, d, 1 + (s * (length - l0)) / l0));
    }
    case "yarn": {
      const fast = scaling.beta_fast || 32; // 0 or missing: the default, as Hugging Face reads it
      const slow = scaling.beta_slow || 1;
      const truncate = scaling.truncate !== false; // GPT-OSS: false keeps the fractional range
      const dim = (n) => (d * Math.log(l0 / (n * TAU))) / (2 * Math.log(base));
      let low = truncate ? Math.floor(dim(fast)) : dim(fast);
      let high = truncate ? Math.ceil(dim(slow)) : dim(slow);
      low = Math.max(low, 0);
      high = Math.min(high, d - 1);
      if (low === high) high += 0.001;
      return inv.map((t, i) => {
        const ramp = Math.min(Math.max((i - low) / (high - low), 0), 1);
        const keep = 1 - ramp;
        return (t / s) * (1 - keep) + t * keep;
      });
    }
    case "llama3": {
      const lo = scaling.low_freq_factor;
      const hi = scaling.high_freq_factor;
      if (hi === lo) return inv.map((t) => (TAU / t > l0 / lo ? t / s : t)); // no smoothing band
      return inv.map((t) => {
        const wavelen = TAU / t;
        if (wavelen < l0 / hi) return t;
        if (wavelen > l0 / lo) return t / s;
        const smooth = (l0 / wavelen - lo) / (hi - lo);
        return ((1 - smooth) * t) / s + smooth * t;
      });
    }
    default:
      throw new Error(`rope_type ${scaling.rope_type} is not drawn here`);
  }
}

// mean_i cos(m theta_i), q = k = all ones (posenc_core.analysis.rope_score_vs_distance)
export function rope_score_vs_distance(distances, d, base) {
  return sinusoidal_similarity(distances, d, base);
}

// RoFormer's bound mean_j |S_j|, S_j = sum_{i<j} exp(i m theta_i) (analysis.rope_decay_bound)
export function rope_decay_bound(distances, d, base) {
  const t = sinusoidal_frequencies(d, base);
  return Float64Array.from(distances, (m) => {
    let re = 0;
    let im = 0;
    let total = 0;
    for (let i = 0; i < t.length; i++) {
      re += Math.cos(m * t[i]);
      im += Math.sin(m * t[i]);
      total += Math.hypot(re, im);
    }
    return total / t.length;
  });
}

// <R(a) q_j, R(b) k_j> summed over pairs j (dims j and j + d/2), angle difference b - a
function rotated_dot(q, k, delta) {
  const h = q.length / 2;
  let s = 0;
  for (let j = 0; j < h; j++) {
    const dot = q[j] * k[j] + q[j + h] * k[j + h];
    const cross = q[j + h] * k[j] - q[j] * k[j + h];
    s += Math.cos(delta[j]) * dot + Math.sin(delta[j]) * cross;
  }
  return s;
}

// scores of the query patch (r, c) under axial 2-D RoPE (posenc_core.multi_axis.axial_score_grid)
export function axial_score_grid(n, r, c, d, base, q, k) {
  if (d % 4) throw new RangeError(`axial 2-D RoPE needs head_dim divisible by 4, got ${d}`);
  const theta = sinusoidal_frequencies(d / 2, base); // d/4 frequencies per axis
  const quarter = d / 4;
  const delta = new Float64Array(d / 2);
  const grid = [];
  for (let rr = 0; rr < n; rr++) {
    const row = new Float64Array(n);
    for (let cc = 0; cc < n; cc++) {
      for (let j = 0; j < quarter; j++) {
        delta[j] = rr * theta[j] - r * theta[j];
        delta[j + quarter] = cc * theta[j] - c * theta[j];
      }
      row[cc] = rotated_dot(q, k, delta);
    }
    grid.push(row);
  }
  return grid;
}

// the same under 1-D RoPE on the raster index r * n + c (multi_axis.raster_score_grid)
export function raster_score_grid(n, r, c, d, base, q, k) {
  const theta = sinusoidal_frequencies(d, base);
  const m = r * n + c;
  const delta = new Float64Array(d / 2);
  const grid = [];
  for (let rr = 0; rr < n; rr++) {
    const row = new Float64Array(n);
    for (let cc = 0; cc < n; cc++) {
      const p = rr * n + cc;
      for (let j = 0; j < d / 2; j++) delta[j] = p * theta[j] - m * theta[j];
      row[cc] = rotated_dot(q, k, delta);
    }
    grid.push(row);
  }
  return grid;
}

// ALiBi's slopes m_h for n heads (posenc_core.alibi.alibi_slopes, Press et al.'s get_slopes):
// 2^(-8 (i + 1) / c) for the largest power of two c <= n, then every other slope of 2c
export function alibi_slopes(n) {
  if (!Number.isInteger(n) || n < 1) throw new RangeError(`n_heads must be a positive integer, got ${n}`);
  const c = 2 ** Math.floor(Math.log2(n));
  const exps = range(0, c).map((i) => (-8 * (i + 1)) / c);
  for (let i = 0; exps.length < n; i += 2) exps.push((-8 * (i + 1)) / (2 * c));
  return Float64Array.from(exps, (e) => Math.pow(2, e));
}

// one head's bias -m (i - j) (causal, -Infinity for j > i) or -m |i - j|, the queries being the
// last q_len of k_len positions (posenc_core.alibi.alibi_bias, one head)
function alibi_head_bias(m, q_len, k_len, causal) {
  const rows = [];
  for (let r = 0; r < q_len; r++) {
    const i = r + k_len - q_len;
    const row = new Float64Array(k_len);
    for (let j = 0; j < k_len; j++) {
      row[j] = causal ? (j > i ? -Infinity : -m * (i - j)) : -m * Math.abs(i - j);
    }
    rows.push(row);
  }
  return rows;
}

// (n_heads, q_len, k_len) bias of every head (posenc_core.alibi.alibi_bias)
export function alibi_bias(n_heads, q_len, k_len, causal) {
  return Array.from(alibi_slopes(n_heads), (m) => alibi_head_bias(m, q_len, k_len, causal));
}

// PE(p) for real positions p: sin(p w_i), cos(p w_i) on dims 2i, 2i+1
// (posenc_core.sinusoidal.sinusoidal_encoding, float64, interleaved)
export function sinusoidal_encoding(positions, d, base) {
  const w = sinusoidal_frequencies(d, base);
  return Array.from(positions, (p) => {
    const row = new Float64Array(d);
    for (let i = 0; i < d / 2; i++) {
      row[2 * i] = Math.sin(p * w[i]);
      row[2 * i + 1] = Math.cos(p * w[i]);
    }
    return row;
  });
}

// the d x d M_k, one shift_matrix_block per pair on the diagonal (posenc_core.rotation.shift_matrix)
export function shift_matrix(k, d, base) {
  const rows = Array.from({ length: d }, () => new Float64Array(d));
  for (let i = 0; i < d / 2; i++) {
    const b = shift_matrix_block(k, d, base, i);
    for (let r = 0; r < 2; r++) for (let c = 0; c < 2; c++) rows[2 * i + r][2 * i + c] = b[r][c];
  }
  return rows;
}

// RoPE's tables for positions m: cos(m theta_i), sin(m theta_i) on both dims of pair i, pairs
// (i, i + d/2) for "half" and (2i, 2i + 1) for "interleaved"; [cos rows, sin rows]
// (posenc_core.rope.rope_cos_sin, float64, no scaling)
export function rope_cos_sin(positions, d, base, layout) {
  if (layout !== "half" && layout !== "interleaved") throw new RangeError(`layout must be "half" or "interleaved", got ${layout}`);
  const theta = sinusoidal_frequencies(d, base);
  const h = d / 2;
  const cos = [];
  const sin = [];
  for (const m of positions) {
    const c = new Float64Array(d);
    const s = new Float64Array(d);
    for (let i = 0; i < h; i++) {
      const a = m * theta[i];
      const [j, k] = layout === "half" ? [i, i + h] : [2 * i, 2 * i + 1];
      c[j] = c[k] = Math.cos(a);
      s[j] = s[k] = Math.sin(a);
    }
    cos.push(c);
    sin.push(s);
  }
  return [cos, sin];
}

// one vector x rotated pair by pair: (a, b) -> (a c - b s, b c + a s), the pairs of `layout`
// (posenc_core.rope.apply_rope, whose formula is rope_formula)
export function apply_rope(x, cos, sin, layout) {
  const h = x.length / 2;
  const out = new Float64Array(x.length);
  for (let i = 0; i < h; i++) {
    const [j, k] = layout === "half" ? [i, i + h] : [2 * i, 2 * i + 1];
    out[j] = x[j] * cos[j] - x[k] * sin[j];
    out[k] = x[k] * cos[k] + x[j] * sin[k];
  }
  return out;
}

// --------------------------------------------------------------------------- 2. drawing

const COLORS = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9"];
const INK = "#222";
const MUTED = "#666";
const FONT = "12px system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif";
const SMALL = "11px system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif";
// matplotlib's RdBu_r at -1, -0.5, 0, 0.5, 1: blue for -1, red for +1
const DIVERGING = [
  [5, 48, 97],
  [67, 147, 195],
  [247, 247, 247],
  [214, 96, 77],
  [103, 0, 31],
];

function number_text(v) {
  // at most 6 significant digits, no exponent below 1e21: 30902.954 -> "30903"
  return String(Number(Number(v).toPrecision(6)));
}

const SUPERSCRIPT = { "-": "⁻", 0: "⁰", 1: "¹", 2: "²", 3: "³", 4: "⁴", 5: "⁵", 6: "⁶", 7: "⁷", 8: "⁸", 9: "⁹" };

function tick_text(v) {
  const a = Math.abs(v);
  if (a !== 0 && (a >= 1e5 || a < 1e-3)) {
    const e = Math.round(Math.log10(a));
    const power = "10" + [...String(e)].map((ch) => SUPERSCRIPT[ch]).join("");
    if (Math.abs(a - 10 ** e) < 1e-9 * a) return (v < 0 ? "−" : "") + power;
    return v.toExponential(0);
  }
  return number_text(v);
}

function nice_ticks(lo, hi, count = 5) {
  const span = hi - lo;
  if (!(span > 0)) return [lo];
  const raw = span / count;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw);
  const out = [];
  for (let t = Math.ceil(lo / step - 1e-9) * step; t <= hi + step * 1e-9; t += step) {
    out.push(Math.abs(t) < step * 1e-9 ? 0 : t);
  }
  return out;
}

function log_ticks(lo, hi) {
  const out = [];
  const a = Math.ceil(Math.log10(lo) - 1e-9);
  const b = Math.floor(Math.log10(hi) + 1e-9);
  const every = Math.max(1, Math.ceil((b - a + 1) / 7));
  for (let e = a; e <= b; e += every) out.push(10 ** e);
  return out;
}

// An axes box: maps data to pixels, draws its frame, ticks, labels and title.
class Axes {
  constructor(ctx, box, x, y) {
    this.ctx = ctx;
    Object.assign(this, { box, x, y });
    const map = (s, a, b) => {
      const f = s.log ? Math.log10 : (v) => v;
      const lo = f(s.lo);
      const span = f(s.hi) - lo || 1;
      return (v) => a + ((f(v) - lo) / span) * (b - a);
    };
    this.X = map(x, box.x, box.x + box.w);
    this.Y = map(y, box.y + box.h, box.y);
  }

  frame({ title, xlabel, ylabel, xticks, yticks, grid = true } = {}) {
    const { ctx, box, x, y } = this;
    ctx.save();
    ctx.font = SMALL;
    ctx.fillStyle = MUTED;
    ctx.strokeStyle = "#e3e3e3";
    ctx.lineWidth = 1;
    // about one tick per 60 px, so that narrow axes (a phone) keep their labels apart
    const xt = xticks || (x.log ? log_ticks(x.lo, x.hi) : nice_ticks(x.lo, x.hi, Math.max(2, Math.min(5, Math.floor(box.w / 60)))));
    const yt = yticks || (y.log ? log_ticks(y.lo, y.hi) : nice_ticks(y.lo, y.hi, 4));
    ctx.textAlign = "center";
    ctx.textBaseline = "top";
    for (const t of xt) {
      const px = this.X(t);
      if (px < box.x - 0.5 || px > box.x + box.w + 0.5) continue;
      if (grid) line(ctx, px, box.y, px, box.y + box.h);
      ctx.fillText(tick_text(t), px, box.y + box.h + 3);
    }
    ctx.textAlign = "right";
    ctx.textBaseline = "middle";
    for (const t of yt) {
      const py = this.Y(t);
      if (py < box.y - 0.5 || py > box.y + box.h + 0.5) continue;
      if (grid) line(ctx, box.x, py, box.x + box.w, py);
      ctx.fillText(tick_text(t), box.x - 4, py);
    }
    ctx.strokeStyle = "#999";
    ctx.strokeRect(box.x + 0.5, box.y + 0.5, box.w, box.h);
    ctx.fillStyle = INK;
    ctx.font = FONT;
    if (title) {
      // one line if it fits, else two smaller ones (a narrow column leaves room above)
      let lines = wrap(ctx, title, box.w - 4, 1);
      if (lines.length > 1 || lines[0] !== title) {
        ctx.font = SMALL;
        lines = wrap(ctx, title, box.w - 4, 2);
      }
      ctx.textAlign = "left";
      ctx.textBaseline = "bottom";
      lines.forEach((text, i) => {
        ctx.fillText(text, box.x, box.y - 5 - 13 * (lines.length - 1 - i));
      });
      ctx.font = FONT;
    }
    if (xlabel) {
      ctx.textAlign = "center";
      ctx.textBaseline = "top";
      ctx.fillText(xlabel, box.x + box.w / 2, box.y + box.h + 18);
    }
    if (ylabel) {
      ctx.translate(box.x - 44, box.y + box.h / 2);
      ctx.rotate(-Math.PI / 2);
      ctx.textAlign = "center";
      ctx.textBaseline = "bottom";
      ctx.fillText(ylabel, 0, 0);
    }
    ctx.restore();
  }

  clip(fn) {
    const { ctx, box } = this;
    ctx.save();
    ctx.beginPath();
    ctx.rect(box.x, box.y, box.w, box.h);
    ctx.clip();
    fn(ctx);
    ctx.restore();
  }

  curve(xs, ys, { color = COLORS[0], width = 1.6, dash = [], dots = false } = {}) {
    this.clip((ctx) => {
      ctx.strokeStyle = color;
      ctx.fillStyle = color;
      ctx.lineWidth = width;
      ctx.setLineDash(dash);
      ctx.beginPath();
      for (let i = 0; i < xs.length; i++) {
        const px = this.X(xs[i]);
        const py = this.Y(ys[i]);
        if (i === 0) ctx.moveTo(px, py);
        else ctx.lineTo(px, py);
      }
      ctx.stroke();
      if (dots) {
        for (let i = 0; i < xs.length; i++) {
          ctx.beginPath();
          ctx.arc(this.X(xs[i]), this.Y(ys[i]), 2.6, 0, TAU);
          ctx.fill();
        }
      }
    });
  }

  band(xs, lo, hi, color) {
    this.clip((ctx) => {
      ctx.fillStyle = color;
      ctx.globalAlpha = 0.22;
      ctx.beginPath();
      for (let i = 0; i < xs.length; i++) ctx.lineTo(this.X(xs[i]), this.Y(hi[i]));
      for (let i = xs.length - 1; i >= 0; i--) ctx.lineTo(this.X(xs[i]), this.Y(lo[i]));
      ctx.closePath();
      ctx.fill();
    });
  }
}

// `text` in at most `most` lines of at most `width` px in the current font, broken between
// words; what does not fit in the last line is cut with an ellipsis
function wrap(ctx, text, width, most) {
  const words = text.split(" ");
  const lines = [];
  let current = "";
  for (let i = 0; i < words.length; i++) {
    const next = current ? `${current} ${words[i]}` : words[i];
    if (!current || ctx.measureText(next).width <= width) {
      current = next;
    } else if (lines.length < most - 1) {
      lines.push(current);
      current = words[i];
    } else {
      current = `${current} ${words.slice(i).join(" ")}`;
      break;
    }
  }
  lines.push(current);
  const last = lines.length - 1;
  while (lines[last].length > 1 && ctx.measureText(lines[last]).width > width) {
    lines[last] = `${lines[last].slice(0, -2).trimEnd()}…`;
  }
  return lines;
}

function line(ctx, x0, y0, x1, y1) {
  ctx.beginPath();
  ctx.moveTo(x0, y0);
  ctx.lineTo(x1, y1);
  ctx.stroke();
}

function diverging(t) {
  // t in [0, 1] -> [r, g, b]
  const u = Math.min(Math.max(t, 0), 1) * (DIVERGING.length - 1);
  const i = Math.min(Math.floor(u), DIVERGING.length - 2);
  const f = u - i;
  return DIVERGING[i].map((a, j) => Math.round(a + (DIVERGING[i + 1][j] - a) * f));
}

// diverging() at LUT_SIZE evenly spaced t, as r, g, b bytes: a heatmap of 100 x 512 cells
// looks its colours up instead of interpolating each one
const LUT_SIZE = 1024;
const DIVERGING_LUT = (() => {
  const lut = new Uint8ClampedArray(3 * LUT_SIZE);
  for (let k = 0; k < LUT_SIZE; k++) lut.set(diverging(k / (LUT_SIZE - 1)), 3 * k);
  return lut;
})();

// rows[r][c] as coloured cells filling box, values vmin..vmax; the pixels are written into a
// buffer kept for each of the last eight grid sizes, so that most updates allocate nothing
const HEATMAP_BUFFERS = new Map();
function heatmap(ctx, box, rows, vmin, vmax) {
  const nr = rows.length;
  const nc = rows[0].length;
  const key = `${nc}x${nr}`;
  if (!HEATMAP_BUFFERS.has(key)) {
    if (HEATMAP_BUFFERS.size >= 8) HEATMAP_BUFFERS.delete(HEATMAP_BUFFERS.keys().next().value);
    const off = new OffscreenCanvas(nc, nr);
    HEATMAP_BUFFERS.set(key, { off, img: new ImageData(nc, nr) });
  }
  const { off, img } = HEATMAP_BUFFERS.get(key);
  const px = img.data;
  const scale = (LUT_SIZE - 1) / (vmax - vmin);
  for (let r = 0; r < nr; r++) {
    const row = rows[r];
    for (let c = 0; c < nc; c++) {
      const t = Math.round((row[c] - vmin) * scale);
      const k = 3 * (t < 0 ? 0 : t >= LUT_SIZE ? LUT_SIZE - 1 : t);
      const o = 4 * (r * nc + c);
      px[o] = DIVERGING_LUT[k];
      px[o + 1] = DIVERGING_LUT[k + 1];
      px[o + 2] = DIVERGING_LUT[k + 2];
      px[o + 3] = 255;
    }
  }
  off.getContext("2d").putImageData(img, 0, 0);
  ctx.save();
  ctx.imageSmoothingEnabled = false;
  ctx.drawImage(off, box.x, box.y, box.w, box.h);
  ctx.restore();
}

// the diverging scale of heatmap() from lo to hi in box, with its values: "vertical" (low at
// the bottom, values to the right) or "horizontal" (low at the left, values below)
function colour_bar(ctx, box, lo, hi, direction, title) {
  const vertical = direction === "vertical";
  const n = Math.round(vertical ? box.h : box.w);
  for (let i = 0; i < n; i++) {
    const [r, g, b] = diverging((i + 0.5) / n);
    ctx.fillStyle = `rgb(${r},${g},${b})`;
    if (vertical) ctx.fillRect(box.x, box.y + box.h - i - 1, box.w, 1.5);
    else ctx.fillRect(box.x + i, box.y, 1.5, box.h);
  }
  ctx.save();
  ctx.strokeStyle = "#999";
  ctx.lineWidth = 1;
  ctx.strokeRect(box.x + 0.5, box.y + 0.5, box.w, box.h);
  ctx.font = SMALL;
  ctx.fillStyle = MUTED;
  ctx.strokeStyle = MUTED;
  const at = (t) => (vertical ? box.y + box.h - ((t - lo) / (hi - lo)) * box.h : box.x + ((t - lo) / (hi - lo)) * box.w);
  const ticks = nice_ticks(lo, hi, vertical ? 5 : Math.max(3, Math.floor(box.w / 50)));
  for (const t of ticks) {
    const u = at(t);
    if (vertical) {
      line(ctx, box.x + box.w, u, box.x + box.w + 4, u);
      ctx.textAlign = "left";
      ctx.textBaseline = "middle";
      ctx.fillText(tick_text(t), box.x + box.w + 6, u);
    } else {
      line(ctx, u, box.y + box.h, u, box.y + box.h + 4);
      ctx.textAlign = "center";
      ctx.textBaseline = "top";
      ctx.fillText(tick_text(t), u, box.y + box.h + 6);
    }
  }
  ctx.fillStyle = INK;
  ctx.textAlign = "left";
  ctx.textBaseline = "bottom";
  if (vertical) ctx.fillText(title, box.x, box.y - 8);
  else ctx.fillText(title, box.x + box.w - ctx.measureText(title).width, box.y - 3);
  ctx.restore();
}

function legend(ctx, x, y, items) {
  // items: [{label, color, dash, band}] in one row from (x, y), wrapping at the canvas edge; an
  // item whose row would pass the canvas's bottom is left out with those after it, counted
  // ("+2 more") at the end of the last row or below it where there is room (words beside the
  // controls name everything a legend holds)
  ctx.save();
  ctx.font = SMALL;
  ctx.textBaseline = "middle";
  let px = x;
  let py = y;
  const t = ctx.getTransform();
  const right = ctx.canvas.width / (t.a || 1) - 8;
  const bottom = (ctx.canvas.height - t.f) / (t.d || 1);
  for (const [k, it] of items.entries()) {
    const w = 26 + ctx.measureText(it.label).width + 14;
    const wraps = px + w > right && px > x;
    const nx = wraps ? x : px;
    const ny = wraps ? py + 16 : py;
    // wider than a whole row (a phone): two lines, and the next item on a row of its own
    const lines = nx + w <= right + 14 ? [it.label] : wrap(ctx, it.label, right - nx - 26, 2);
    if (ny + 13 * (lines.length - 1) + 6 > bottom) {
      const more = `+${items.length - k} more`;
      ctx.fillStyle = MUTED;
      if (px + ctx.measureText(more).width <= right) ctx.fillText(more, px, py);
      else if (py + 16 + 6 <= bottom) ctx.fillText(more, x, py + 16);
      break;
    }
    px = nx;
    py = ny;
    if (it.band) {
      ctx.globalAlpha = 0.22;
      ctx.fillStyle = it.color;
      ctx.fillRect(px, py - 5, 20, 10);
      ctx.globalAlpha = 1;
    }
    ctx.strokeStyle = it.color;
    ctx.lineWidth = 2;
    ctx.setLineDash(it.dash || []);
    line(ctx, px, py, px + 20, py);
    ctx.setLineDash([]);
    ctx.fillStyle = INK;
    lines.forEach((text, i) => ctx.fillText(text, px + 26, py + 13 * i));
    py += 13 * (lines.length - 1);
    px = lines.length > 1 ? right : px + w;
  }
  ctx.restore();
  return py;
}

// --------------------------------------------------------------------------- 3. controls

// What a reader may type into a number's field, read by parse_number and nothing else:
// - the text is trimmed; after that at most MAX_TYPED characters are read: a longer text is
//   refused ("too long") and never echoed whole (echo() cuts any echo to 20 characters);
// - fullwidth forms (U+FF01 to U+FF5E: digits, point, comma, signs, e) read as their ASCII
//   characters (written here as code points: the page's CJK font is cut to the characters the
//   pages use, this module's text included), and the minus sign U+2212 and its lookalikes
//   (‐ ‑ ‒ – ﹣) as "-": −5 is -5;
// - a number is an optional sign, decimal digits with at most one decimal point and an
//   optional exponent e±n: 5, -5, +5, 2.5, .5, 5., 1e6, 2.5E-3;
// - decimal only: 0x10, 0b100, 0o17 are refused ("decimal digits only"); Infinity, NaN and
//   anything else that is not such a number: "not a number";
// - a comma, an underscore or a space (regular, no-break, thin, narrow) may group the
//   digits before the point in thousands, one kind of separator per number, groups of exactly
//   three digits after a first of one to three: 10,000, 1,000,000.5, 10_000 and 10 000 are
//   10000 and 1000000.5. Any other comma is refused, never dropped: a single one before the
//   last digits, which could be a decimal comma (2,5, 1,25, 10,00, 1.000,5), with "use a
//   point for decimals", others (1,2,3, 1,000 000) as not groups of three; any other space
//   (1 6, 5 e3) with "one number, no spaces". A grouped number refused as out of range says
//   that decimals take a point (1,500 typed for 1.5);
// - a value too large or too close to zero for a float64 (1e400, 1e-400, which Number reads
//   as Infinity and 0) is refused as out of range, not read as Infinity or 0; -0 reads as 0.
// parse_number(text) -> {value} or {reason, why}: reason is one of REASONS (what the tests
// check), why the words the hint shows. read_number(p, text) adds the control's own rules
// (range, whole number, step); check_values(spec, values, current) checks values that arrive
// from the model (the saved state, a kernel).
const MAX_TYPED = 40;
const ECHO = 20;
const REASONS = [
  "empty",
  "too-long",
  "not-decimal",
  "decimal-comma",
  "grouping",
  "spaces",
  "not-a-number",
  "overflow",
  "underflow",
  "range",
  "whole",
  "step",
];
const MINUS_LOOKALIKES = /[\u2010-\u2013\u2212\uFE63]/g;
const FULLWIDTH = /[\uFF01-\uFF5E]/g;
const PLAIN = /^[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?$/;
// sign, first group, separator, more groups of three, fraction, exponent
const GROUPED = /^[+-]?[0-9]{1,3}([,_]|\s)[0-9]{3}(?:\1[0-9]{3})*(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?$/;
const SLIDER_TOL = 1e-12; // as explorer.py: a real from a kernel this far (relative) outside is clipped

function refused(reason, why) {
  return { reason, why };
}

// `text` for a message: trimmed and cut to `most` characters with an ellipsis
function echo(text, most = ECHO) {
  const s = String(text).trim();
  return s.length > most ? `${s.slice(0, most)}…` : s;
}

function parse_number(text) {
  let s = String(text ?? "").trim();
  if (s === "") return refused("empty", "no number typed");
  if (s.length > MAX_TYPED) return refused("too-long", `too long (at most ${MAX_TYPED} characters)`);
  s = s.replace(FULLWIDTH, (ch) => String.fromCharCode(ch.charCodeAt(0) - 0xfee0));
  s = s.replace(MINUS_LOOKALIKES, "-");
  let grouped = false;
  if (!PLAIN.test(s)) {
    if (/^[+-]?0[xbo]/i.test(s)) return refused("not-decimal", "decimal digits only (no 0x, 0b, 0o)");
    if (!GROUPED.test(s)) {
      const commas = (s.match(/,/g) || []).length;
      if (commas === 1 && /^[+-]?[0-9.]*,[0-9]+(?:[eE][+-]?[0-9]+)?$/.test(s)) {
        return refused("decimal-comma", "use a point for decimals");
      }
      if (commas) return refused("grouping", "a comma only between groups of three digits");
      const numeric = /^[0-9.eE+\-_\s]+$/.test(s);
      if (numeric && /\s/.test(s)) return refused("spaces", "one number, no spaces");
      if (numeric && s.includes("_")) return refused("grouping", "_ only between groups of three digits");
      return refused("not-a-number", "not a number");
    }
    s = s.replace(/[,_\s]/g, "");
    grouped = true;
  }
  const v = Number(s);
  if (!Number.isFinite(v)) return refused("overflow", "out of range (too large)");
  const mantissa = s.split(/[eE]/)[0];
  if (v === 0 && /[1-9]/.test(mantissa)) return refused("underflow", "too close to 0 to tell apart");
  return grouped ? { value: v + 0, grouped } : { value: v + 0 };
}

// why the control `p` (a number's spec) cannot take `v`, or "" if it can
function check_number(p, v) {
  const span = `from ${number_text(p.min)} to ${number_text(p.max)}`;
  if (typeof v !== "number" || !Number.isFinite(v)) return `not a number (enter one ${span})`;
  if (v < p.min || v > p.max) return `out of range (enter a number ${span})`;
  if (p.kind === "int" && !Number.isInteger(v)) return "not a whole number";
  if (p.kind === "int" && (v - p.min) % (p.step || 1)) return `not a multiple of ${p.step}`;
  return "";
}

// the typed `text` as a value of the number control `p`: {value} or {reason, why}
function read_number(p, text) {
  const got = parse_number(text);
  const span = `from ${number_text(p.min)} to ${number_text(p.max)}`;
  if (got.reason === "overflow") return refused("overflow", `out of range (enter a number ${span})`);
  if (got.reason === "underflow") return refused("underflow", `too close to 0 (enter a number ${span})`);
  if (got.reason) return got;
  const v = got.value;
  const why = check_number(p, v);
  if (!why) return { value: v };
  if (why.startsWith("out of range")) {
    // 1,500 for a factor from 1 to 32: meant as 1.5, perhaps
    const comma = got.grouped && /[,\uFF0C]/.test(String(text));
    return refused("range", `out of range (${comma ? `${span}; for decimals use a point` : `enter a number ${span}`})`);
  }
  return refused(why.startsWith("not a whole") ? "whole" : "step", why);
}

function check_choice(p, v) {
  if (p.options.some((o) => o.value === v)) return "";
  const labels = p.options.map((o) => o.label);
  const listed = labels.length > 5 ? `${labels.slice(0, 5).join(", ")}, …` : labels.join(", ");
  return `not one of ${echo(listed, 50)}`;
}

// Values from the model (the saved state, or a kernel that sets the `values` trait), checked
// as the controls check their own: a number a control's range holds (a real up to SLIDER_TOL
// outside is clipped, as explorer.py does), whole and on the step for an int; a choice among
// the options, compared strictly. Names the explorer lacks are ignored, as explorer.py ignores
// them. Returns {values, problems}, problems [{name, why}] (name null: the whole dict). With
// no problem `values` are the incoming ones; with any, `current` unchanged (the last good
// state: a change from the kernel applies whole or not at all), or, with no current (the
// first drawing), the incoming values with each bad one replaced (a number brought into
// range, else the minimum; a choice by the first option).
function check_values(spec, incoming, current = null) {
  const problems = [];
  const out = {};
  if (incoming === null || typeof incoming !== "object" || Array.isArray(incoming)) {
    problems.push({ name: null, why: "values must be a dict of the controls' values" });
    for (const p of spec.params) out[p.name] = current ? current[p.name] : fallback(p, undefined);
    return { values: out, problems };
  }
  for (const p of spec.params) {
    let v = incoming[p.name];
    let why;
    if (!Object.prototype.hasOwnProperty.call(incoming, p.name)) why = "no value given";
    else if (p.kind === "choice") why = check_choice(p, v);
    else {
      if (p.kind === "real" && typeof v === "number" && Number.isFinite(v)) {
        if (v < p.min && v >= p.min - SLIDER_TOL * Math.abs(p.min)) v = p.min;
        if (v > p.max && v <= p.max + SLIDER_TOL * Math.abs(p.max)) v = p.max;
      }
      why = check_number(p, v);
    }
    if (why) problems.push({ name: p.name, why, value: v });
    if (!why) out[p.name] = v;
    else if (current && Object.prototype.hasOwnProperty.call(current, p.name)) out[p.name] = current[p.name];
    else out[p.name] = fallback(p, v);
  }
  for (const p of spec.params) {
    if (!p.upto || problems.some((q) => q.name === p.name) || !(out[p.name] > out[p.upto])) continue;
    problems.push({ name: p.name, why: `more than ${p.upto} = ${out[p.upto]}`, value: out[p.name] });
    out[p.name] = current ? current[p.name] : out[p.upto];
  }
  if (problems.length && current) return { values: { ...current }, problems };
  return { values: out, problems };
}

// a value from the model as a message quotes it: strings in quotes, NaN as NaN
function quoted(v) {
  if (typeof v === "number") return String(v);
  try {
    return JSON.stringify(v) ?? String(v);
  } catch (err) {
    return String(v);
  }
}

function fallback(p, v) {
  if (p.kind === "choice") return p.options[0].value;
  if (typeof v !== "number" || !Number.isFinite(v)) return p.min;
  let x = Math.min(Math.max(v, p.min), p.max);
  if (p.kind === "int") {
    const step = p.step || 1;
    x = p.min + Math.floor((x - p.min) / step) * step;
  }
  return x;
}

let counter = 0;

function element(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (k === "class") node.className = v;
    else if (k.startsWith("aria-") || k.startsWith("data-") || k === "role" || k === "for") {
      node.setAttribute(k, v);
    } else node[k] = v;
  }
  node.append(...children);
  return node;
}

// One parameter: a slider with a typed value (numbers) or a row of buttons (choices).
class Control {
  constructor(p, value, onchange) {
    this.p = p;
    this.onchange = onchange;
    const id = `posenc-${p.name}-${++counter}`;
    this.node = element("div", { class: "posenc-control", "data-param": p.name });
    if (p.kind === "choice") this.buttons(id, value);
    else this.slider(id, value);
  }

  text(v) {
    if (this.p.kind === "choice") return this.p.options.find((o) => o.value === v)?.label ?? "";
    return number_text(v);
  }

  slider(id, value) {
    const p = this.p;
    const label = element("label", { class: "posenc-control-label", for: id }, p.label);
    this.range = element("input", {
      type: "range",
      id,
      class: "posenc-slider",
      min: String(p.log ? Math.log10(p.min) : p.min),
      max: String(p.log ? Math.log10(p.max) : p.max),
      step: String(p.log ? p.slider_step : p.step),
    });
    this.field = element("input", {
      type: "text",
      class: "posenc-value",
      inputMode: p.kind === "int" ? "numeric" : "decimal",
      autocomplete: "off",
      spellcheck: false,
      "aria-label": `${p.label}: type a value from ${number_text(p.min)} to ${number_text(p.max)}`,
    });
    this.hint = element("span", { class: "posenc-hint", role: "status" });
    this.range.addEventListener("input", () => {
      const x = Number(this.range.value);
      this.commit(this.snap(p.log ? 10 ** x : x));
    });
    if (p.log) {
      // keys on a log slider: arrows move by a hundredth of a decade, Page keys by a tenth;
      // on integers at least by one, so that every integer is reachable from the keyboard
      const steps = { ArrowRight: 0.01, ArrowUp: 0.01, ArrowLeft: -0.01, ArrowDown: -0.01 };
      Object.assign(steps, { PageUp: 0.1, PageDown: -0.1 });
      this.range.addEventListener("keydown", (e) => {
        const dx = steps[e.key];
        if (dx === undefined) return;
        e.preventDefault();
        let v = this.snap(10 ** (Math.log10(this.value) + dx));
        if (p.kind === "int" && v === this.value) v = this.snap(this.value + Math.sign(dx));
        if (v !== this.value) this.commit(v);
      });
    }
    const typed = () => {
      const got = read_number(p, this.field.value);
      if (got.reason) {
        this.refuse(`${echo(this.field.value) || "empty"}: ${got.why}; kept ${this.text(this.value)}`);
        this.field.setAttribute("aria-invalid", "true");
        this.show(this.value);
        return;
      }
      this.commit(got.value);
    };
    this.field.addEventListener("change", typed);
    this.field.addEventListener("keydown", (e) => {
      if (e.key === "Enter") typed();
    });
    this.node.append(label, this.range, this.field, this.hint);
    this.show(value);
  }

  snap(v) {
    const p = this.p;
    if (p.kind === "int") {
      const step = p.step || 1;
      v = p.min + Math.round((v - p.min) / step) * step;
    }
    return Math.min(Math.max(v, p.min), p.max);
  }

  buttons(id, value) {
    const p = this.p;
    const label = element("span", { class: "posenc-control-label", id }, p.label);
    this.group = element("div", { class: "posenc-buttons", role: "group", "aria-labelledby": id });
    this.btns = p.options.map((o) => {
      const b = element("button", { type: "button", class: "posenc-button" }, o.label);
      b.addEventListener("click", () => this.commit(o.value));
      this.group.append(b);
      return b;
    });
    this.hint = element("span", { class: "posenc-hint", role: "status" });
    this.node.append(label, this.group, this.hint);
    this.show(value);
  }

  show(v) {
    this.value = v;
    if (this.p.kind === "choice") {
      this.p.options.forEach((o, i) => {
        const on = o.value === v;
        this.btns[i].setAttribute("aria-pressed", on ? "true" : "false");
        this.btns[i].classList.toggle("posenc-selected", on);
      });
      return;
    }
    const x = this.p.log ? Math.log10(v) : v;
    if (Number(this.range.value) !== x) this.range.value = String(x);
    this.range.setAttribute("aria-valuetext", `${this.p.label} ${this.text(v)}`);
    this.field.value = this.text(v);
  }

  // a value from this control (typed, slider, keys, buttons), checked once more here: taken,
  // it clears any message and shows; refused (none of the controls should send one), it is not
  commit(v) {
    const p = this.p;
    const why = p.kind === "choice" ? check_choice(p, v) : check_number(p, v);
    if (why) {
      this.refuse(`${echo(this.text(v) || String(v))}: ${why}; kept ${this.text(this.value)}`);
      this.show(this.value);
      return;
    }
    this.clear();
    this.show(v);
    this.onchange(p.name, v);
  }

  // a message beside the control (at most about 100 characters: what it quotes is cut)
  refuse(message) {
    this.hint.textContent = message;
  }

  clear() {
    this.hint.textContent = "";
    if (this.field) this.field.removeAttribute("aria-invalid");
  }

  enable(on, why) {
    this.node.classList.toggle("posenc-disabled", !on);
    for (const input of this.node.querySelectorAll("input, button")) input.disabled = !on;
    this.node.title = on ? "" : why;
  }

  // a choice's buttons one by one: on(value) says whether that option does something
  enableOptions(on, why) {
    this.p.options.forEach((o, i) => {
      const ok = on(o.value);
      this.btns[i].disabled = !ok;
      this.btns[i].title = ok ? "" : why;
    });
  }

  // a number's largest value, moved (the value itself is the caller's to lower)
  limit(most) {
    if (this.p.max === most) return;
    this.p = { ...this.p, max: most };
    this.range.max = String(this.p.log ? Math.log10(most) : most);
    this.field.setAttribute("aria-label", `${this.p.label}: type a value from ${number_text(this.p.min)} to ${number_text(most)}`);
    if (this.value !== undefined) this.show(this.value);
  }
}

// --------------------------------------------------------------------------- 4. explorers

const range = (a, b) => Array.from({ length: b - a }, (_, i) => a + i);

// curves that depend on an explorer's constants alone, computed once per widget
const REFERENCES = new WeakMap();
function reference_curves(c, make) {
  if (!REFERENCES.has(c)) REFERENCES.set(c, make());
  return REFERENCES.get(c);
}

const EXPLORERS = {
  sinusoidal: {
    height: 390,
    compute(v, c) {
      const table = sinusoidal_table(c.n_positions, v.d_model, c.base);
      return { table, fingerprint: table[v.position] };
    },
    label: (v) => `d_model = ${v.d_model} · position = ${v.position}`,
    draw(ctx, W, data, v, c) {
      const box = { x: 56, y: 26, w: W - 72, h: 200 };
      heatmap(ctx, box, data.table, -1, 1);
      const heat = new Axes(ctx, box, { lo: 0, hi: v.d_model }, { lo: c.n_positions, hi: 0 });
      heat.frame({
        title: `${c.n_positions} positions × ${v.d_model} dimensions, base ${number_text(c.base)} (red\u00a0+1, blue\u00a0−1)`,
        ylabel: "position",
        grid: false,
        yticks: nice_ticks(0, c.n_positions - 1, 4),
      });
      ctx.strokeStyle = INK;
      ctx.lineWidth = 2;
      const y0 = heat.Y(v.position);
      ctx.strokeRect(box.x, y0, box.w, heat.Y(v.position + 1) - y0);
      const fp = new Axes(
        ctx,
        { x: 56, y: 262, w: W - 72, h: 90 },
        { lo: -0.5, hi: v.d_model - 0.5 },
        { lo: -1.15, hi: 1.15 },
      );
      fp.frame({
        title: `the row of position ${v.position}: its fingerprint`,
        xlabel: "dimension",
        yticks: [-1, 0, 1],
      });
      fp.curve(range(0, v.d_model), data.fingerprint, { width: 1.3, dots: v.d_model <= 64 });
    },
  },

  base: {
    height: 430,
    compute(v, c) {
      const offsets = range(0, c.max_offset + 1);
      return {
        table: sinusoidal_table(c.n_positions, c.d_model, v.base),
        wavelength: sinusoidal_wavelengths(c.d_model, v.base),
        offsets,
        similarity: sinusoidal_similarity(offsets, c.d_model, v.base),
        ...reference_curves(c, () => ({
          wavelength_reference: sinusoidal_wavelengths(c.d_model, 10000),
          similarity_reference: sinusoidal_similarity(offsets, c.d_model, 10000),
        })),
      };
    },
    label: (v, data) =>
      `base = ${number_text(v.base)} · longest wavelength ${number_text(data.wavelength.at(-1))} positions`,
    draw(ctx, W, data, v, c) {
      const box = { x: 56, y: 24, w: W - 72, h: 120 };
      heatmap(ctx, box, data.table, -1, 1);
      new Axes(ctx, box, { lo: 0, hi: c.d_model }, { lo: c.n_positions, hi: 0 }).frame({
        title: `the table, ${c.n_positions} positions × ${c.d_model} dimensions`,
        ylabel: "position",
        grid: false,
        yticks: nice_ticks(0, c.n_positions - 1, 3),
      });
      const half = (W - 72 - 64) / 2;
      const pairs = range(0, c.d_model / 2);
      const wl = new Axes(
        ctx,
        { x: 56, y: 188, w: half, h: 170 },
        { lo: 0, hi: c.d_model / 2 - 1 },
        { lo: 1, hi: 1e8, log: true },
      );
      wl.frame({ title: "wavelength λ_i", xlabel: "pair i", yticks: [1, 1e2, 1e4, 1e6, 1e8] });
      wl.curve(pairs, data.wavelength_reference, { color: "#999", dash: [5, 4] });
      wl.curve(pairs, data.wavelength, { color: COLORS[0] });
      const sim = new Axes(
        ctx,
        { x: 56 + half + 64, y: 188, w: half, h: 170 },
        { lo: 0, hi: c.max_offset },
        { lo: -0.25, hi: 1.02 },
      );
      sim.frame({ title: "similarity s(k)", xlabel: "offset k", yticks: [0, 0.5, 1] });
      sim.curve(data.offsets, data.similarity_reference, { color: "#999", dash: [5, 4] });
      sim.curve(data.offsets, data.similarity, { color: COLORS[1] });
      legend(ctx, 56, 412, [
        { label: `base ${number_text(v.base)}`, color: COLORS[0] },
        { label: "base 10000", color: "#999", dash: [5, 4] },
      ]);
    },
  },

  "unit-circle": {
    // the text beside the circle, or under it where the column is narrower than both
    height: (W) => (W < 560 ? 500 : 330),
    compute(v, c) {
      const w = sinusoidal_frequencies(c.d_model, c.base)[v.pair];
      const at = (p) => [Math.sin(p * w), Math.cos(p * w)];
      return {
        omega: w,
        angle: w * v.offset,
        starts: c.starts,
        start_points: c.starts.map((p) => at(p)),
        end_points: c.starts.map((p) => at(p + v.offset)),
        matrix: shift_matrix_block(v.offset, c.d_model, c.base, v.pair),
      };
    },
    label: (v, data) =>
      `pair i = ${v.pair} · offset k = ${v.offset} · turn ω_i k = ${data.angle.toFixed(4)} rad`,
    draw(ctx, W, data, v, c) {
      const R = 125;
      const cx = 40 + R;
      const cy = 28 + R;
      // cos on the horizontal axis, sin on the vertical one
      const P = ([s, co]) => [cx + R * co, cy - R * s];
      ctx.strokeStyle = "#bbb";
      ctx.lineWidth = 1;
      ctx.beginPath();
      ctx.arc(cx, cy, R, 0, TAU);
      ctx.stroke();
      line(ctx, cx - R - 10, cy, cx + R + 10, cy);
      line(ctx, cx, cy - R - 10, cx, cy + R + 10);
      ctx.font = SMALL;
      ctx.fillStyle = MUTED;
      ctx.textAlign = "left";
      ctx.fillText(`cos(ω_${v.pair} p)`, cx + R - 40, cy + 14);
      ctx.fillText(`sin(ω_${v.pair} p)`, cx + 6, cy - R - 2);
      data.start_points.forEach((s, j) => {
        const e = data.end_points[j];
        const color = COLORS[j % COLORS.length];
        const a0 = Math.atan2(-s[0], s[1]);
        const turn = Math.min(data.angle, 3 * TAU); // the arc shows at most three turns
        ctx.strokeStyle = color;
        ctx.lineWidth = 2;
        ctx.beginPath();
        const r = R * (0.8 - 0.09 * j);
        for (let t = 0; t <= 60; t++) {
          const a = a0 - (turn * t) / 60;
          ctx.lineTo(cx + r * Math.cos(a), cy + r * Math.sin(a));
        }
        ctx.stroke();
        const [sx, sy] = P(s);
        const [ex, ey] = P(e);
        ctx.fillStyle = color;
        ctx.beginPath();
        ctx.arc(sx, sy, 5, 0, TAU);
        ctx.fill();
        ctx.lineWidth = 2;
        ctx.fillStyle = "#fff";
        ctx.beginPath();
        ctx.arc(ex, ey, 5, 0, TAU);
        ctx.fill();
        ctx.stroke();
      });
      const narrow = W < 560;
      const x = narrow ? 16 : 2 * R + 90;
      ctx.fillStyle = INK;
      ctx.font = FONT;
      let y = narrow ? cy + R + 40 : 40;
      const say = (text, font = FONT, color = INK) => {
        ctx.font = font;
        ctx.fillStyle = color;
        ctx.fillText(text, x, y);
        y += 19;
      };
      say(`pair i = ${v.pair}: ω_i = ${data.omega.toPrecision(4)}`);
      say(`offset k = ${v.offset}: every position turns by`);
      say(`ω_i k = ${data.angle.toFixed(4)} rad`);
      y += 8;
      say("the block of M_k, PE(p + k) = M_k PE(p):");
      const m = data.matrix;
      const cell = (z) => (z < 0 ? "−" : " ") + Math.abs(z).toFixed(4);
      say(`[ ${cell(m[0][0])}  ${cell(m[0][1])} ]`, "13px ui-monospace, monospace");
      say(`[ ${cell(m[1][0])}  ${cell(m[1][1])} ]`, "13px ui-monospace, monospace");
      y += 8;
      data.start_points.forEach((_, j) => {
        say(
          `● p = ${c.starts[j]}   ○ p + k = ${c.starts[j] + v.offset}`,
          SMALL,
          COLORS[j % COLORS.length],
        );
      });
    },
  },

  "rope-decay": {
    height: 330,
    compute(v, c) {
      const b0 = rope_decay_bound([0], c.head_dim, v.base)[0];
      return {
        distances: c.distances,
        score: rope_score_vs_distance(c.distances, c.head_dim, v.base),
        bound: rope_decay_bound(c.distances, c.head_dim, v.base).map((x) => x / b0),
        marker: [v.distance, rope_score_vs_distance([v.distance], c.head_dim, v.base)[0]],
      };
    },
    label: (v, data) => {
      const s = data.marker[1];
      return `base = ${number_text(v.base)} · distance = ${v.distance} · score = ${s < 0 ? "−" : "+"}${Math.abs(s).toFixed(4)}`;
    },
    draw(ctx, W, data, v, c) {
      const ax = new Axes(
        ctx,
        { x: 56, y: 26, w: W - 76, h: 230 },
        { lo: 1, hi: c.max_distance, log: true },
        { lo: -0.3, hi: 1.05 },
      );
      ax.frame({
        title: `RoPE, head_dim ${c.head_dim}, base ${number_text(v.base)}: q = k = all ones`,
        xlabel: "relative distance (log scale)",
        ylabel: "score / head_dim",
        yticks: [0, 0.25, 0.5, 0.75, 1],
      });
      ax.curve(data.distances, data.bound, { color: MUTED, dash: [5, 4] });
      ax.curve(data.distances, data.score, { color: COLORS[0], width: 1.3 });
      const [m, s] = data.marker;
      ctx.fillStyle = COLORS[1];
      ctx.beginPath();
      ctx.arc(ax.X(m), ax.Y(s), 5, 0, TAU);
      ctx.fill();
      legend(ctx, 56, 312, [
        { label: "score", color: COLORS[0] },
        { label: "RoFormer's bound (scaled to 1 at 0)", color: MUTED, dash: [5, 4] },
        { label: `distance ${m}`, color: COLORS[1] },
      ]);
    },
  },

  "rope-scaling": {
    height: 340,
    setup(v, c) {
      const [base, l0, extra] = c.models[v.method];
      const scaling = { rope_type: v.method, factor: v.factor, ...extra };
      const seq = v.method === "dynamic" ? Math.round(v.factor * l0) : null;
      return { base, l0, scaling, seq };
    },
    compute(v, c) {
      const { base, l0, scaling, seq } = this.setup(v, c);
      const original = rope_frequencies(c.head_dim, base, null, null);
      const scaled = rope_frequencies(c.head_dim, base, scaling, seq);
      const wavelength = original.map((t) => TAU / t);
      const wavelength_scaled = scaled.map((t) => TAU / t);
      return {
        wavelength,
        inv_freq_original: original,
        inv_freq: scaled,
        ratio: scaled.map((t, i) => t / original[i]),
        wavelength_scaled,
        // a pair that turned once within the training window L0 and no longer does
        crosses: Array.from(wavelength, (w, i) => w <= l0 && wavelength_scaled[i] > l0),
        train_len: l0,
      };
    },
    counts(v, data) {
      const close = (a, b) => Math.abs(a - b) <= 1e-9 * Math.abs(b);
      const kept = data.ratio.filter((r) => close(r, 1)).length;
      const interp = data.ratio.filter((r) => close(r, 1 / v.factor)).length;
      return [kept, interp, data.ratio.length - kept - interp];
    },
    label(v, data, c) {
      if (c.view === "spectrum") {
        const n = data.crosses.filter((x) => x).length;
        const below = data.wavelength.filter((w) => w <= data.train_len).length;
        return `factor = ${number_text(v.factor)} · method = ${v.method} · ${n} of the ${below} wavelengths within L0 = ${data.train_len} now cross it`;
      }
      const [k, i, b] = this.counts(v, data);
      return `factor = ${number_text(v.factor)} · method = ${v.method} · kept ${k}, interpolated ${i}, in between ${b}`;
    },
    draw(ctx, W, data, v, c) {
      if (c.view === "spectrum") return this.spectrum(ctx, W, data, v, c);
      const { base, l0 } = this.setup(v, c);
      const s = v.factor;
      const ax = new Axes(
        ctx,
        { x: 60, y: 26, w: W - 80, h: 230 },
        { lo: 4, hi: 1e7, log: true },
        { lo: 1 / 40, hi: 1.6, log: true },
      );
      const [k, i, b] = this.counts(v, data);
      ax.frame({
        title: `${v.method}, s = ${number_text(s)}, base ${number_text(base)}: ${k} pairs kept, ${i} interpolated, ${b} in between`,
        xlabel: "original wavelength 2π/θ_i (positions)",
        ylabel: "scaled θ_i / original θ_i",
        yticks: [1 / 32, 1 / 8, 1 / 2, 1],
      });
      ctx.save();
      ctx.font = SMALL;
      ctx.setLineDash([3, 3]);
      const marks = [
        [`L0 = ${l0}`, l0],
        [`s·L0 = ${number_text(s * l0)}`, s * l0],
      ];
      if (v.method === "yarn") marks.unshift(["L0/β_fast", l0 / 32]);
      if (v.method === "llama3") marks.unshift(["L0/4", l0 / 4]);
      marks.forEach(([text, x], j) => {
        ctx.strokeStyle = "#999";
        const px = ax.X(x);
        line(ctx, px, ax.box.y, px, ax.box.y + ax.box.h);
        ctx.fillStyle = MUTED;
        ctx.textAlign = "left";
        ctx.fillText(text, px + 3, ax.box.y + 12 + 13 * j);
      });
      ctx.restore();
      ax.curve([4, 1e7], [1, 1], { color: "#bbb", dash: [2, 3], width: 1 });
      ax.curve([4, 1e7], [1 / s, 1 / s], { color: "#bbb", dash: [2, 3], width: 1 });
      ax.curve(data.wavelength, data.ratio, { color: COLORS[0], dots: true });
      legend(ctx, 60, 322, [
        { label: "one dot per pair", color: COLORS[0] },
        { label: `ratio 1 (kept) and 1/s = ${number_text(1 / s)} (interpolated)`, color: "#bbb", dash: [2, 3] },
      ]);
    },
    // every pair's wavelength before (grey) and after (blue) against the pair index, the
    // training length L0 shaded, the pairs whose wavelength crosses L0 ringed in orange
    spectrum(ctx, W, data, v, c) {
      const { base, l0 } = this.setup(v, c);
      const s = v.factor;
      const half = c.head_dim / 2;
      const ax = new Axes(
        ctx,
        { x: 60, y: 26, w: W - 80, h: 230 },
        { lo: -0.5, hi: half - 0.5 },
        { lo: 2, hi: 2e8, log: true },
      );
      ctx.fillStyle = "#f1f1f1";
      ctx.fillRect(ax.box.x, ax.Y(l0), ax.box.w, ax.box.y + ax.box.h - ax.Y(l0));
      const n = data.crosses.filter((x) => x).length;
      ax.frame({
        title: `${v.method}, s = ${number_text(s)}, base ${number_text(base)}: ${n} wavelengths cross L0 = ${l0}`,
        xlabel: "pair i",
        ylabel: "wavelength (positions)",
        yticks: [10, 1e3, 1e5, 1e7],
      });
      ctx.save();
      ctx.font = SMALL;
      ctx.fillStyle = MUTED;
      ctx.textAlign = "right";
      ctx.textBaseline = "bottom";
      // bottom right: the slow pairs' wavelengths there are long, above L0, leaving it empty
      ctx.fillText(`shaded: a full turn within 0..${l0}`, ax.box.x + ax.box.w - 4, ax.box.y + ax.box.h - 4);
      ctx.restore();
      ax.curve([-0.5, half - 0.5], [l0, l0], { color: MUTED, dash: [5, 4], width: 1 });
      ax.curve([-0.5, half - 0.5], [s * l0, s * l0], { color: "#bbb", dash: [2, 3], width: 1 });
      const pairs = range(0, half);
      ax.curve(pairs, data.wavelength, { color: "#999", width: 1, dots: true });
      ax.curve(pairs, data.wavelength_scaled, { color: COLORS[0], width: 1.4, dots: true });
      ax.clip((g) => {
        g.strokeStyle = COLORS[1];
        g.lineWidth = 2;
        pairs.forEach((i) => {
          if (!data.crosses[i]) return;
          g.beginPath();
          g.arc(ax.X(i), ax.Y(data.wavelength_scaled[i]), 5.5, 0, TAU);
          g.stroke();
        });
      });
      legend(ctx, 60, 322, [
        { label: "original", color: "#999" },
        { label: `${v.method}, s = ${number_text(s)}`, color: COLORS[0] },
        { label: `crosses L0 (${n})`, color: COLORS[1] },
        { label: `L0 and s·L0 = ${number_text(s * l0)}`, color: MUTED, dash: [5, 4] },
      ]);
    },
  },

  "patch-scores": {
    height(W) {
      return Math.round(this.size(W) + (W < 500 ? 94 : 96));
    },
    compute(v, c) {
      const n = c.grid;
      const axial = axial_score_grid(n, v.row, v.col, c.head_dim, c.base, c.q, c.q);
      const raster = raster_score_grid(n, v.row, v.col, c.head_dim, c.base, c.q, c.q);
      const at = (g, r, cc) => (r < n && cc < n ? g[r][cc] : null); // null: off the grid
      return {
        axial,
        raster,
        below: [at(axial, v.row + 1, v.col), at(raster, v.row + 1, v.col)],
        right: [at(axial, v.row, v.col + 1), at(raster, v.row, v.col + 1)],
      };
    },
    label(v, data) {
      const f = (x) => (x === null ? "none (edge)" : x.toFixed(2));
      const [ab, rb] = data.below;
      const [ar, rr] = data.right;
      const below = ab === null ? "none (last row)" : `axial ${f(ab)}, raster ${f(rb)}`;
      const right = ar === null ? "none (last column)" : `axial ${f(ar)}, raster ${f(rr)}`;
      return `row = ${v.row} · col = ${v.col} · patch below: ${below} · patch to the right: ${right}`;
    },
    // the two grids fill the column; a colour bar with values beside them (below where the
    // column is narrow)
    size(W) {
      return W < 500 ? (W - 24 - 40 - 8) / 2 : Math.min(270, (W - 24 - 40 - 76) / 2);
    },
    draw(ctx, W, data, v, c) {
      const size = this.size(W);
      const narrow = W < 500;
      const titles = narrow ? ["axial 2-D", "1-D, raster order"] : ["axial 2-D RoPE", "1-D RoPE on the raster order"];
      const y0 = narrow ? 28 : 44; // a narrow canvas already starts lower (render's `top`)
      [data.axial, data.raster].forEach((g, j) => {
        const box = { x: 24 + j * (size + 40), y: y0, w: size, h: size };
        heatmap(ctx, box, g, c.vlim[0], c.vlim[1]);
        ctx.strokeStyle = "#999";
        ctx.lineWidth = 1;
        ctx.strokeRect(box.x + 0.5, box.y + 0.5, size, size);
        const cell = size / c.grid;
        ctx.strokeStyle = INK;
        ctx.lineWidth = 2.5;
        ctx.strokeRect(box.x + v.col * cell + 1, box.y + v.row * cell + 1, cell - 2, cell - 2);
        ctx.fillStyle = INK;
        ctx.font = FONT;
        ctx.textAlign = "left";
        ctx.fillText(titles[j], box.x, box.y - 8);
      });
      const [lo, hi] = c.vlim;
      const bar = narrow
        ? { x: 24, y: y0 + size + 16, w: 2 * size + 40, h: 10 }
        : { x: 24 + 2 * size + 40 + 18, y: y0, w: 12, h: size };
      colour_bar(ctx, bar, lo, hi, narrow ? "horizontal" : "vertical", narrow ? "score q · k" : "q · k");
      ctx.font = SMALL;
      ctx.fillStyle = MUTED;
      ctx.textAlign = "left";
      ctx.textBaseline = "alphabetic";
      const below = narrow ? bar.y + bar.h + 40 : y0 + size + 22;
      ctx.fillText(`query patch (outlined) at row ${v.row}, column ${v.col}`, 24, below);
      ctx.fillText("one colour scale for both grids and every query patch", 24, below + 16);
    },
  },

  alibi: {
    height: (W) => (W < 560 ? 560 : 360),
    compute(v) {
      const slopes = alibi_slopes(v.heads);
      const m = slopes[v.head - 1];
      const rows = alibi_head_bias(m, v.length, v.length, v.variant === "causal");
      return {
        slopes,
        slope: m,
        bias: rows.map((r) => r.map((x) => (x === -Infinity ? 0 : x + 0))),
        allowed: rows.map((r) => Array.from(r, (x) => x !== -Infinity)),
      };
    },
    label(v, data) {
      const minus = (x) => number_text(x).replace("-", "−");
      const e = Math.log2(data.slope);
      const far = -data.slope * (v.length - 1);
      return `heads n = ${v.heads} · head shown = ${v.head}: m = 2^(${minus(e)}) = ${number_text(data.slope)} · length = ${v.length} · ${v.variant} · bias at distance ${v.length - 1}: ${minus(far)}`;
    },
    draw(ctx, W, data, v) {
      const narrow = W < 560;
      const n = v.heads;
      const c2 = 2 ** Math.floor(Math.log2(n)); // the power of two whose slopes come first
      const sw = narrow ? W - 80 : (W - 110) / 2;
      const ax = new Axes(
        ctx,
        { x: 56, y: 26, w: sw, h: narrow ? 150 : 230 },
        { lo: 0.5, hi: n + 0.5 },
        { lo: -8.5, hi: 0.5 },
      );
      ax.frame({
        title: `log2 of the slope, ${n} head${n > 1 ? "s" : ""}`,
        xlabel: "head",
        xticks: n <= 8 ? range(1, n + 1) : nice_ticks(1, n, Math.max(2, Math.floor(sw / 50))).filter((t) => Number.isInteger(t)),
        yticks: [-8, -6, -4, -2, 0],
      });
      ax.clip((g) => {
        Array.from(data.slopes).forEach((m, h) => {
          g.fillStyle = h < c2 ? COLORS[0] : COLORS[2];
          g.beginPath();
          g.arc(ax.X(h + 1), ax.Y(Math.log2(m)), n > 32 ? 2.2 : 3.2, 0, TAU);
          g.fill();
        });
        g.strokeStyle = COLORS[1];
        g.lineWidth = 2;
        g.beginPath();
        g.arc(ax.X(v.head), ax.Y(Math.log2(data.slope)), 6.5, 0, TAU);
        g.stroke();
      });
      // the bias of the head shown, one colour scale for every head of this count
      const size = narrow ? Math.min(W - 80, 250) : Math.min(230, (W - 110) / 2);
      const box = narrow ? { x: 56, y: 26 + 150 + 64, w: size, h: size } : { x: W - 24 - size, y: 26, w: size, h: size };
      const most = Math.max(...data.slopes) * (v.length - 1);
      heatmap(ctx, box, data.bias, -most, most);
      const cell = size / v.length;
      ctx.fillStyle = "#d0d0d0";
      data.allowed.forEach((row, i) =>
        row.forEach((ok, j) => {
          if (!ok) ctx.fillRect(box.x + j * cell, box.y + i * cell, cell + 0.5, cell + 0.5);
        }),
      );
      new Axes(ctx, box, { lo: 0, hi: v.length }, { lo: v.length, hi: 0 }).frame({
        title: `head ${v.head}: bias −m·${v.variant === "causal" ? "(i − j)" : "|i − j|"}`,
        xlabel: "key j",
        ylabel: "query i",
        grid: false,
        xticks: nice_ticks(0, v.length - 1, 3),
        yticks: nice_ticks(0, v.length - 1, 3),
      });
      const items = [{ label: `slopes of ${c2} heads`, color: COLORS[0] }];
      if (c2 < n) items.push({ label: `every other slope of ${2 * c2}`, color: COLORS[2] });
      items.push({ label: `head shown`, color: COLORS[1] });
      const low = `−${Number(most.toPrecision(3))}`;
      items.push({ label: `white 0 to blue ${low}${v.variant === "causal" ? ", grey masked" : ""}`, color: "#4393c3" });
      legend(ctx, 56, narrow ? box.y + size + 40 : 322, items);
    },
  },

  "rope-pair": {
    // the pairs' panels are as wide as the column allows
    panel(W, c) {
      const P = c.head_dim / 2;
      return Math.min(150, (W - 24 - (P - 1) * 10) / P);
    },
    height(W, c) {
      return Math.round(this.panel(W, c) + (W < 500 ? 270 : 300));
    },
    turn(x, p, layout, c) {
      if (layout === null) return Float64Array.from(x); // left unrotated
      const [cos, sin] = rope_cos_sin([p], c.head_dim, c.base, layout);
      return apply_rope(x, cos[0], sin[0], layout);
    },
    compute(v, c) {
      const dot = (a, b) => a.reduce((s, x, i) => s + x * b[i], 0);
      const shifts = range(0, c.args.max_position + 1);
      const along = ([lq, lk]) => shifts.map((t) => dot(this.turn(c.q, v.m + t, lq, c), this.turn(c.k, v.n + t, lk, c)));
      const [lq, lk] = c.layouts[v.rotation];
      const q_rot = this.turn(c.q, v.m, lq, c);
      const k_rot = this.turn(c.k, v.n, lk, c);
      return {
        q_rot,
        k_rot,
        score: dot(q_rot, k_rot),
        shifts,
        scores: along(c.layouts[v.rotation]),
        scores_correct: along(c.layouts.correct),
      };
    },
    names: { correct: "correct RoPE", "layouts-mixed": "layouts mixed", "key-unrotated": "key not rotated" },
    // max - min of the score as both positions move on: 0 (to rounding) when it is relative
    spread: (data) => Math.max(...data.scores) - Math.min(...data.scores),
    label(v, data, c) {
      const f = (x) => `${x < 0 ? "−" : "+"}${Math.abs(x).toFixed(3)}`;
      const flat = this.spread(data) <= 1e-9 * c.bound;
      const moved = flat
        ? "unchanged when both move on (relative)"
        : `from ${f(Math.min(...data.scores))} to ${f(Math.max(...data.scores))} when both move on`;
      return `m = ${v.m} · n = ${v.n} · m − n = ${v.m - v.n} · ${this.names[v.rotation]} · score ${f(data.score)}, ${moved}`;
    },
    draw(ctx, W, data, v, c) {
      const P = c.head_dim / 2;
      const gap = 10;
      const s = this.panel(W, c);
      const R = s / 2 - 3;
      const norm = (x) => Math.hypot(...x);
      const reach = Math.max(norm(c.q), norm(c.k)); // no pair is longer than its vector
      const theta = sinusoidal_frequencies(c.head_dim, c.base);
      const narrow = W < 500;
      for (let i = 0; i < P; i++) {
        const x0 = 12 + i * (s + gap);
        const cx = x0 + s / 2;
        const cy = 30 + s / 2;
        ctx.strokeStyle = "#ddd";
        ctx.lineWidth = 1;
        ctx.beginPath();
        ctx.arc(cx, cy, R, 0, TAU);
        ctx.stroke();
        line(ctx, cx - R, cy, cx + R, cy);
        line(ctx, cx, cy - R, cx, cy + R);
        const arrow = (x, color, alpha) => {
          const ex = cx + (R * x[2 * i]) / reach;
          const ey = cy - (R * x[2 * i + 1]) / reach;
          ctx.save();
          ctx.globalAlpha = alpha;
          ctx.strokeStyle = color;
          ctx.fillStyle = color;
          ctx.lineWidth = 2;
          line(ctx, cx, cy, ex, ey);
          const a = Math.atan2(ey - cy, ex - cx);
          ctx.beginPath();
          ctx.moveTo(ex, ey);
          ctx.lineTo(ex - 7 * Math.cos(a - 0.4), ey - 7 * Math.sin(a - 0.4));
          ctx.lineTo(ex - 7 * Math.cos(a + 0.4), ey - 7 * Math.sin(a + 0.4));
          ctx.closePath();
          ctx.fill();
          ctx.restore();
        };
        arrow(c.q, COLORS[0], 0.25);
        arrow(c.k, COLORS[1], 0.25);
        arrow(data.q_rot, COLORS[0], 1);
        arrow(data.k_rot, COLORS[1], 1);
        ctx.fillStyle = INK;
        ctx.font = narrow ? SMALL : FONT;
        ctx.textAlign = "left";
        ctx.textBaseline = "bottom";
        ctx.fillText(narrow ? `pair ${i}` : `pair ${i}: θ = ${number_text(theta[i].toPrecision(3))}`, x0, 26);
      }
      const top = 30 + s + 36;
      const T = c.args.max_position;
      const ax = new Axes(ctx, { x: 56, y: top, w: W - 76, h: narrow ? 130 : 160 }, { lo: 0, hi: T }, { lo: -c.bound, hi: c.bound });
      ax.frame({
        title: `score of the same two tokens, both moved on by t (m − n = ${v.m - v.n} kept)`,
        xlabel: "t: query at m + t, key at n + t",
        ylabel: "score ⟨q, k⟩",
      });
      if (v.rotation !== "correct") ax.curve(data.shifts, data.scores_correct, { color: "#999", dash: [5, 4] });
      ax.curve(data.shifts, data.scores, { color: COLORS[2], width: 1.8 });
      ctx.fillStyle = INK;
      ctx.beginPath();
      ctx.arc(ax.X(0), ax.Y(data.score), 4.5, 0, TAU);
      ctx.fill();
      const items = [
        { label: "query (faint: before turning)", color: COLORS[0] },
        { label: "key", color: COLORS[1] },
        { label: this.names[v.rotation], color: COLORS[2] },
      ];
      if (v.rotation !== "correct") items.push({ label: "correct RoPE", color: "#999", dash: [5, 4] });
      legend(ctx, 56, top + ax.box.h + 44, items);
    },
  },

  shift: {
    height: 430,
    compute(v, c) {
      const d = c.d_model;
      const [encoding, shifted] = sinusoidal_encoding([v.position, v.position + v.offset], d, c.base);
      const M = shift_matrix(v.offset, d, c.base);
      const rotated = Float64Array.from(M, (row) => row.reduce((s, x, j) => s + x * encoding[j], 0));
      const A = c.matrices[v.projection];
      const positions = range(0, c.n_positions);
      const here = sinusoidal_encoding(positions, d, c.base);
      const there = sinusoidal_encoding(positions.map((p) => p + v.offset), d, c.base);
      // PE(p)^T A PE(p + k)
      const scores = positions.map((p) => A.reduce((s, row, i) => s + here[p][i] * row.reduce((t, a, j) => t + a * there[p][j], 0), 0));
      return { encoding, shifted, rotated, positions, scores, score: scores[v.position] };
    },
    names: { identity: "A = I", commuting: "commuting part", random: "random head" },
    label(v, data, c) {
      const err = Math.max(...data.shifted.map((x, i) => Math.abs(x - data.rotated[i])));
      const lo = Math.min(...data.scores);
      const hi = Math.max(...data.scores);
      const flat = hi - lo <= 1e-9 * Math.max(1, Math.abs(hi));
      const along = flat ? "the same for every p" : `from ${lo.toFixed(3)} to ${hi.toFixed(3)} along p`;
      return `p = ${v.position} · k = ${v.offset} · max |M_k PE(p) − PE(p + k)| = ${err.toExponential(1)} · ${this.names[v.projection]}: score ${data.score.toFixed(3)}, ${along}`;
    },
    draw(ctx, W, data, v, c) {
      const d = c.d_model;
      const p = v.position;
      const k = v.offset;
      const vec = new Axes(ctx, { x: 56, y: 26, w: W - 76, h: 140 }, { lo: -0.5, hi: d - 0.5 }, { lo: -1.2, hi: 1.2 });
      vec.frame({
        title: `PE(${p + k}) (line) and M_${k} PE(${p}) (rings): the same vector`,
        xlabel: "dimension",
        yticks: [-1, 0, 1],
        xticks: nice_ticks(0, d - 1, W < 500 ? 3 : 8).filter((t) => Number.isInteger(t)),
      });
      const dims = range(0, d);
      vec.curve(dims, data.encoding, { color: "#bbb", width: 1, dots: true });
      vec.curve(dims, data.shifted, { color: COLORS[0], width: 1.6, dots: true });
      vec.clip((g) => {
        g.strokeStyle = COLORS[1];
        g.lineWidth = 2;
        dims.forEach((j) => {
          g.beginPath();
          g.arc(vec.X(j), vec.Y(data.rotated[j]), 6, 0, TAU);
          g.stroke();
        });
      });
      const [lo, hi] = c.ylim[v.projection];
      const sc = new Axes(ctx, { x: 56, y: 234, w: W - 76, h: 130 }, { lo: 0, hi: c.n_positions - 1 }, { lo, hi });
      sc.frame({
        title: `PE(p)ᵀ A PE(p ${k < 0 ? "−" : "+"} ${Math.abs(k)}) for every p, ${this.names[v.projection]}`,
        xlabel: "position p",
        ylabel: "score",
      });
      sc.curve(data.positions, data.scores, { color: COLORS[2], width: 1.8 });
      ctx.fillStyle = COLORS[1];
      ctx.beginPath();
      ctx.arc(sc.X(p), sc.Y(data.score), 5, 0, TAU);
      ctx.fill();
      legend(ctx, 56, 412, [
        { label: `PE(p + k)`, color: COLORS[0] },
        { label: `M_k PE(p) (rings)`, color: COLORS[1] },
        { label: `PE(p)`, color: "#bbb" },
        { label: `score, p = ${p} marked`, color: COLORS[2] },
      ]);
    },
  },

  "position-loss": {
    height: 360,
    keyOf(v, c) {
      // the curve shown for the controls' values (posenc_core.book.widgets.measured._resolve)
      const want = c.controls.map((p) => v[p.name]);
      const match = (w) =>
        c.curves.findIndex((cv) => cv.key.every((a, i) => a === null || a === w[i]));
      let found = match(want);
      for (let i = want.length - 1; i >= 1 && found < 0; i--) {
        want[i] = c.start[i];
        found = match(want);
      }
      return found < 0 ? c.default : found;
    },
    compute(v, c, state) {
      const shown = c.curves[this.keyOf(v, c)];
      const data = {
        shown: shown.key,
        x: shown.x,
        mean: shown.mean,
        low: shown.low,
        high: shown.high,
        in_range: shown.in_range,
        beyond: shown.beyond,
      };
      data.compared = state.pinned.map((i) => c.curves[i].key);
      return data;
    },
    // the values of the curve shown (a choice without a curve of its own falls back: the
    // controls then show the curve drawn); null when they are that already
    snap(v, data, c) {
      const out = { ...v };
      c.controls.forEach((p, i) => {
        if (data.shown[i] !== null) out[p.name] = data.shown[i];
      });
      return c.controls.some((p) => out[p.name] !== v[p.name]) ? out : null;
    },
    // whether option o of control i shows a curve with that option, the controls before i kept
    // (later ones may fall back); the others are disabled
    reachable(v, c, i, o) {
      const want = { ...v, [c.controls[i].name]: o };
      const key = c.curves[this.keyOf(want, c)].key;
      return c.controls.every((p, j) => j > i || key[j] === null || key[j] === want[p.name]);
    },
    describe(key, c) {
      return c.controls
        .map((p, i) => (key[i] === null ? null : `${p.label} = ${optionLabel(p, key[i])}`))
        .filter((x) => x)
        .join(" · ");
    },
    label(v, data, c) {
      const mean = (a) => a.reduce((s, x) => s + x, 0) / a.length;
      const shown = c.curves.find((cv) => cv.key === data.shown);
      const L = c.train_len;
      // the means' ranges: of positions, or of the axis's own x (e.g. "d in [32, 64)", "d ≥ 64")
      const sym = c.axes[shown.axis].symbol;
      const near = `${sym ? `${sym} in ` : ""}[${L / 2 | 0}, ${L})`;
      const far = sym ? `${sym} ≥ ${L}` : `[${L}, ${c.positions})`;
      // three decimals, a minus sign where negative and none on a rounded zero (-0.0001)
      const f3 = (x) => {
        const r = Math.round(x * 1000) / 1000 + 0;
        return (r < 0 ? "−" : "") + Math.abs(r).toFixed(3);
      };
      let text = `${this.describe(data.shown, c)} · mean over ${near}: ${f3(mean(data.in_range))} · over ${far}: ${f3(mean(data.beyond))}`;
      if (shown.reference !== null) {
        const r = c.references[shown.reference];
        const d1 = mean(data.in_range) - r.in_range_mean;
        const d2 = mean(data.beyond) - r.beyond_mean;
        const sg = (x) => (Math.round(x * 1000) / 1000 + 0 < 0 ? "" : "+") + f3(x);
        text += ` · ${r.label}: ${f3(r.in_range_mean)} and ${f3(r.beyond_mean)} (difference ${sg(d1)} and ${sg(d2)})`;
      }
      const want = c.controls.map((p) => v[p.name]);
      if (!c.curves.some((cv) => cv.key.every((a, i) => a === null || a === want[i]))) {
        text += ` · no curve for this combination; shown: ${this.describe(data.shown, c)}`;
      }
      const idle = c.controls.filter((_, i) => data.shown[i] === null).map((p) => p.label);
      if (idle.length) text += ` · ${idle.join(", ")}: not applicable`;
      return text;
    },
    draw(ctx, W, data, v, c, state) {
      const L = c.train_len;
      const shown = c.curves.find((cv) => cv.key === data.shown);
      const axis = c.axes[shown.axis]; // the x values, labels and y limits of this measure
      const ax = new Axes(
        ctx,
        { x: 60, y: 26, w: W - 80, h: 250 },
        { lo: 0, hi: c.positions },
        { lo: axis.ylim[0], hi: axis.ylim[1] },
      );
      ctx.fillStyle = "#f1f1f1";
      ctx.fillRect(ax.X(0), ax.box.y, ax.X(L) - ax.X(0), ax.box.h);
      ctx.save();
      ctx.font = SMALL;
      ctx.fillStyle = MUTED;
      ctx.textAlign = "left";
      ctx.textBaseline = "bottom";
      // the shaded range's label, on two lines where one is wider than the range
      const said = axis.shade.replace("\n", " ");
      const bottom = ax.box.y + ax.box.h - 4;
      if (ctx.measureText(said).width <= ax.X(L) - ax.X(0) - 8) ctx.fillText(said, ax.X(0) + 4, bottom);
      else {
        const [first, second = ""] = axis.shade.split("\n");
        ctx.fillText(first, ax.X(0) + 4, bottom - 13);
        ctx.fillText(second, ax.X(0) + 4, bottom);
      }
      ctx.restore();
      const xt = [];
      const most = Math.max(2, Math.min(8, Math.floor(ax.box.w / 45))); // ticks the width holds
      for (let t = 0; t <= c.positions; t += L * Math.max(1, Math.ceil(c.positions / L / most))) {
        xt.push(t);
      }
      ax.frame({ title: this.describe(data.shown, c), xlabel: axis.xlabel, ylabel: axis.ylabel, xticks: xt });
      if (axis.ylim[0] < 0 && axis.ylim[1] > 0) {
        // y = 0 (e.g. nothing saved), over the grid, under the curves
        ctx.save();
        ctx.strokeStyle = "#777";
        ctx.lineWidth = 1;
        line(ctx, ax.X(0), ax.Y(0), ax.X(c.positions), ax.Y(0));
        ctx.restore();
      }
      const items = [];
      const dots = axis.points; // values at a few x of their own (e.g. distances): marked
      const ref = shown.reference === null ? null : c.references[shown.reference];
      if (ref) {
        ax.band(ref.x, ref.low, ref.high, "#000");
        ax.curve(ref.x, ref.mean, { color: "#000", dash: [5, 4], width: 1.4, dots });
        items.push({ label: ref.label, color: "#000", dash: [5, 4], band: true });
      }
      ax.band(data.x, data.low, data.high, COLORS[0]);
      ax.curve(data.x, data.mean, { color: COLORS[0], width: 1.8, dots });
      state.pinned.forEach((i, j) => {
        // a kept curve is dashed, drawn over the one shown (the first kept is the one shown);
        // one of another axis (another measure) is only named, beside the buttons
        const cv = c.curves[i];
        if (cv.axis !== shown.axis) return;
        const color = COLORS[(j + 1) % COLORS.length];
        if (cv !== shown) ax.band(cv.x, cv.low, cv.high, color);
        ax.curve(cv.x, cv.mean, { color, width: 2, dash: [6, 3], dots });
        // named by what differs from the curve shown (the title names that one)
        const own = cv.key.map((a, k) => (a === shown.key[k] ? null : a));
        items.push({ label: `kept: ${this.describe(own, c) || "the curve shown"}`, color, dash: [6, 3] });
      });
      const seeds = c.n_seeds ? `mean over ${c.n_seeds} seeds, band min to max` : "mean over seeds, band min to max";
      items.unshift({ label: `shown (${seeds})`, color: COLORS[0], band: true });
      legend(ctx, 60, 322, items);
    },
  },
};

function optionLabel(p, value) {
  return p.options.find((o) => o.value === value)?.label ?? String(value);
}

// --------------------------------------------------------------------------- render

function render({ model, el }) {
  const spec = model.get("spec");
  const kind = EXPLORERS[spec.kind];
  const c = spec.consts;
  if (spec.kind === "position-loss") {
    // keys refer to curves by index from here on (the label finds them by identity)
    c.curves.forEach((cv) => Object.freeze(cv.key));
  }
  const first = check_values(spec, model.get("values"));
  const state = { values: first.values, pinned: [] };
  const root = element("div", {
    class: `posenc-explorer posenc-explorer-${spec.name}`,
    role: "group",
    "aria-label": spec.title,
  });
  const controls = element("div", { class: "posenc-controls" });
  const status = element("div", { class: "posenc-frame-label", "aria-live": "polite" });
  // what concerns no one control: values that are not a dict, a drawing that failed
  const notice = element("div", { class: "posenc-hint posenc-notice", role: "status" });
  const canvas = element("canvas", { class: "posenc-canvas", role: "img" });
  const controlOf = {};
  // a control whose largest value is another's (a head shown of n heads) follows it
  const follow = () => {
    for (const p of spec.params) {
      if (!p.upto) continue;
      const most = state.values[p.upto];
      controlOf[p.name].limit(most);
      if (state.values[p.name] > most) {
        state.values = { ...state.values, [p.name]: most };
        controlOf[p.name].show(most);
      }
    }
  };
  for (const p of spec.params) {
    const ctl = new Control(p, state.values[p.name], (name, value) => {
      state.values = { ...state.values, [name]: value };
      follow();
      update(true);
    });
    controlOf[p.name] = ctl;
    controls.append(ctl.node);
  }
  follow();
  let compare = null;
  // what is kept for comparison, said in words beside the buttons (the first click shows)
  const kept = element("span", { class: "posenc-kept", "aria-live": "polite" });
  if (spec.kind === "position-loss" && c.curves.length > 1) {
    const pin = element("button", { type: "button", class: "posenc-button" }, "compare: keep this curve");
    const clear = element("button", { type: "button", class: "posenc-button" }, "clear");
    pin.addEventListener("click", () => {
      const i = c.curves.findIndex((cv) => cv.key === root.posenc.data.shown);
      if (!state.pinned.includes(i)) state.pinned.push(i);
      update(false);
    });
    clear.addEventListener("click", () => {
      state.pinned = [];
      update(false);
    });
    compare = element("div", { class: "posenc-control posenc-compare" }, pin, clear, kept);
    controls.append(compare);
  }
  // one line on what to try, above the controls
  if (spec.hint) root.append(element("p", { class: "posenc-try" }, spec.hint));
  root.append(controls, notice, status, canvas);
  el.append(root);

  // The column's width, read when the explorer is first drawn and then kept by the
  // ResizeObserver below: an update never reads layout, so it never waits for the page's.
  const fit = (w) => Math.round(Math.min(672, Math.max(320, w || 672)));
  let column = null;
  let width = 0;
  let draws = 0;
  function paint(data) {
    if (column === null) column = fit(root.clientWidth);
    const W = column;
    width = W;
    // a narrow column: room above for titles in two lines, below for a second legend row
    const top = W < 500 ? 14 : 0;
    const tall = typeof kind.height === "function" ? kind.height(W, c) : kind.height;
    const H = tall + (W < 500 ? top + 30 : 0);
    const dpr = Math.max(1, Math.min(3, window.devicePixelRatio || 1));
    if (canvas.width !== Math.round(W * dpr)) canvas.width = Math.round(W * dpr);
    if (canvas.height !== Math.round(H * dpr)) canvas.height = Math.round(H * dpr);
    if (canvas.style.width !== `${W}px`) canvas.style.width = `${W}px`; // height: aspect ratio
    const ctx = canvas.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.fillStyle = "#fff";
    ctx.fillRect(0, 0, W, H);
    ctx.translate(0, top);
    kind.draw(ctx, W, data, state.values, c, state);
    draws += 1;
  }

  // Values from the model that check_values refused: each control's reason beside it
  function report(problems) {
    for (const { name, why, value } of problems) {
      const ctl = name === null ? null : controlOf[name];
      if (!ctl) {
        notice.textContent = why;
        continue;
      }
      const given = value === undefined ? "" : `${echo(quoted(value))}: `;
      ctl.refuse(`${given}${why}; kept ${ctl.text(state.values[name])}`);
    }
  }

  // Computes and draws state.values. Should that throw (no value check_values lets through
  // ought to), the explorer goes back to the values it last drew and says so: it keeps drawing.
  function update(sync) {
    const t0 = performance.now();
    let v = state.values;
    let data;
    let text;
    try {
      data = kind.compute(v, c, state);
      const snapped = kind.snap ? kind.snap(v, data, c) : null;
      if (snapped) {
        // the controls show what is drawn: a choice with no curve falls back, and says so
        state.values = v = snapped;
        for (const p of spec.params) controlOf[p.name].show(v[p.name]);
      }
      text = kind.label(v, data, c);
      paint(data);
    } catch (err) {
      const good = root.posenc;
      notice.textContent = `could not draw ${echo(JSON.stringify(v), 40)}: ${echo(err.message, 40)}`;
      if (good) {
        state.values = { ...good.values };
        for (const p of spec.params) controlOf[p.name].show(good.values[p.name]);
        try {
          paint(good.data);
        } catch (again) {
          // the canvas keeps what it had
        }
      }
      return;
    }
    notice.textContent = "";
    status.textContent = text;
    canvas.setAttribute("aria-label", `${spec.title}: ${text}`);
    if (spec.kind === "position-loss") {
      const shown = data.shown;
      c.controls.forEach((p, i) => {
        controlOf[p.name].enable(shown[i] !== null, `${p.label} does not apply to this curve`);
        if (shown[i] !== null) {
          controlOf[p.name].enableOptions((o) => kind.reachable(v, c, i, o), "no curve for this choice");
        }
      });
      const here = c.curves.find((cv) => cv.key === shown).axis;
      const said = (i) =>
        kind.describe(c.curves[i].key, c) + (c.curves[i].axis === here ? "" : " (another measure: not drawn)");
      kept.textContent = state.pinned.length ? `kept (dashed): ${state.pinned.map(said).join("; ")}` : "";
    }
    root.posenc = { spec, values: { ...v }, data, draws, ms: performance.now() - t0, model };
    root.dataset.values = JSON.stringify(v);
    if (sync) {
      model.set("values", { ...v });
      model.save_changes();
    }
  }

  // values set from the model (a kernel): checked as typed ones are, applied whole or not at all
  model.on("change:values", () => {
    const incoming = model.get("values");
    if (JSON.stringify(incoming) === JSON.stringify(state.values)) return;
    const { values, problems } = check_values(spec, incoming, state.values);
    if (problems.length) {
      report(problems);
      return;
    }
    state.values = values;
    for (const p of spec.params) {
      controlOf[p.name].clear();
      controlOf[p.name].show(values[p.name]);
    }
    update(false);
  });
  update(false);
  report(first.problems);
  if (typeof ResizeObserver !== "undefined") {
    const ro = new ResizeObserver((entries) => {
      column = fit(entries.at(-1).contentRect.width);
      if (column !== width && root.posenc) paint(root.posenc.data);
    });
    ro.observe(root);
    return () => ro.disconnect();
  }
  return undefined;
}

export { REASONS, check_values, parse_number, read_number };
export default { render };
