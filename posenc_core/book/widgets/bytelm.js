// The book's byte model (posenc_core.book.models.byte_lm.ByteLM and layered_lm.LayeredLM), its
// forward pass in the reader's browser, in plain JavaScript.
//
// A model is its architecture (`arch`, JSON from posenc_core.book.widgets.lab.model_spec) and
// its weights (the committed safetensors checkpoint, float32). A `run` says how positions enter
// each layer for one pass: the layer's rotation (frequencies, layout, rotated dims, attention
// factor, bfloat16 angles, xPos scales), window, chunk, query temperature and sinks, plus the
// positions fed to the model, a document mask and permuted query/key rows (lab.py's run_spec,
// the shipped bugs and scaling methods written out). Everything is computed in float64 from the
// float32 weights; tests/book/test_lab_engine.py checks the logits against PyTorch's ByteLM,
// with each change applied through posenc_core, to 1e-4 of the largest logit (in node).
//
// Shapes: s = sequence, d = d_model, h = heads, dh = head width, V = 256. Arrays are flat,
// row-major: x[t * d + i].

export const VOCAB = 256;
const LN_EPS = 1e-5;

// ---------------------------------------------------------------------------- weights

// {name: Float64Array} from a safetensors file (an ArrayBuffer); float32 tensors only
export function parse_safetensors(buffer) {
  if (!(buffer instanceof ArrayBuffer)) throw new TypeError("buffer must be an ArrayBuffer");
  if (buffer.byteLength < 8) throw new RangeError(`not a safetensors file: ${buffer.byteLength} bytes`);
  const n = Number(new DataView(buffer).getBigUint64(0, true));
  if (n <= 0 || 8 + n > buffer.byteLength) throw new RangeError(`not a safetensors file: header of ${n} bytes`);
  const header = JSON.parse(new TextDecoder().decode(new Uint8Array(buffer, 8, n)));
  const out = {};
  for (const [name, t] of Object.entries(header)) {
    if (name === "__metadata__") continue;
    if (t.dtype !== "F32") throw new TypeError(`${name}: dtype ${t.dtype}, expected F32`);
    const [a, b] = t.data_offsets;
    const count = t.shape.reduce((p, q) => p * q, 1);
    if (b - a !== 4 * count || 8 + n + b > buffer.byteLength) throw new RangeError(`${name}: bad offsets`);
    out[name] = Float64Array.from(new Float32Array(buffer.slice(8 + n + a, 8 + n + b)));
  }
  return out;
}

// the weights the architecture needs, checked by size: {arch, w}
export function load_model(arch, tensors) {
  const d = arch.d_model;
  const need = { "embed.weight": VOCAB * d, "ln_f.weight": d, "ln_f.bias": d };
  for (let l = 0; l < arch.layers.length; l++) {
    const p = `blocks.${l}.`;
    Object.assign(need, {
      [p + "ln1.weight"]: d, [p + "ln1.bias"]: d, [p + "ln2.weight"]: d, [p + "ln2.bias"]: d,
      [p + "attn.qkv.weight"]: 3 * d * d, [p + "attn.qkv.bias"]: 3 * d,
      [p + "attn.proj.weight"]: d * d, [p + "attn.proj.bias"]: d,
      [p + "fc.weight"]: 4 * d * d, [p + "fc.bias"]: 4 * d,
      [p + "out.weight"]: 4 * d * d, [p + "out.bias"]: d,
    });
    if (arch.layers[l].sinks) need[p + "attn.sinks"] = arch.n_heads;
  }
  if (arch.table && arch.table.kind === "learned") need["pos.weight"] = arch.table.rows * d;
  if (arch.bias && arch.bias.kind === "t5") need["bias.bias.relative_attention_bias.weight"] = arch.bias.num_buckets * arch.n_heads;
  if (d % arch.n_heads || (d / arch.n_heads) % 2) throw new RangeError(`${arch.n_heads} heads do not split d_model ${d} into even widths`);
  for (const [name, size] of Object.entries(need)) {
    if (!tensors[name]) throw new RangeError(`the checkpoint of ${arch.name} lacks ${name}`);
    if (tensors[name].length !== size) throw new RangeError(`${name}: ${tensors[name].length} values, expected ${size}`);
  }
  return { arch, w: tensors };
}

// ---------------------------------------------------------------------------- positions

// the positions a run feeds the model for s tokens (Int32Array)
export function run_positions(run, s) {
  const pos = new Int32Array(s);
  const rule = run.positions || { kind: "plain" };
  for (let t = 0; t < s; t++) {
    switch (rule.kind) {
      case "plain": pos[t] = t; break;
      case "shift": pos[t] = t + rule.by; break;
      case "mod": pos[t] = t % rule.n; break;
      case "lag": pos[t] = t - Math.floor(t / rule.k) * (rule.k - 1); break;
      default: throw new RangeError(`unknown positions rule ${rule.kind}`);
    }
  }
  return pos;
}

// ---------------------------------------------------------------------------- rotation

const F32 = new Float32Array(1);
const U32 = new Uint32Array(F32.buffer);
// x rounded to bfloat16 (through float32, round to nearest even), as torch's .bfloat16()
export function bf16(x) {
  F32[0] = x;
  const u = U32[0];
  U32[0] = ((u + 0x7fff + ((u >>> 16) & 1)) >>> 0) & 0xffff0000;
  return F32[0];
}

// theta_i of one rotation for a pass of seq_len positions (float64)
export function rope_inv_freq(rope, seq_len) {
  if (rope.inv_freq) return rope.inv_freq;
  const r = rope.rotary_dim;
  const inv = new Float64Array(r / 2);
  if (rope.dynamic) {
    // posenc_core.rope.scaling.dynamic_inv_freq; `sticky`: the length of an earlier, longer
    // call kept for every call of at least L0 (bugs.StickyDynamicNTK, transformers#25306)
    const { factor, l0, sticky } = rope.dynamic;
    const length = sticky && seq_len >= l0 ? Math.max(sticky, seq_len) : Math.max(seq_len, l0);
    const base = length > l0 ? rope.base * Math.pow(1 + (factor * (length - l0)) / l0, r / (r - 2)) : rope.base;
    for (let i = 0; i < r / 2; i++) inv[i] = Math.pow(base, -(2 * i) / r);
    return inv;
  }
  if (rope.longrope) {  // posenc_core.rope.scaling.longrope_inv_freq
    const ext = seq_len > rope.longrope.l0 ? rope.longrope.long : rope.longrope.short;
    for (let i = 0; i < r / 2; i++) inv[i] = Math.pow(rope.base, -(2 * i) / r) / ext[i];
    return inv;
  }
  throw new RangeError("a rotation needs inv_freq, dynamic or longrope");
}

// cos and sin (s x r/2) of a rotation at the given positions, with its attention factor
function rotation_tables(rope, positions, seq_len) {
  const half = rope.rotary_dim / 2;
  const inv = rope_inv_freq(rope, seq_len);
  const s = positions.length;
  const cos = new Float64Array(s * half);
  const sin = new Float64Array(s * half);
  const scale = rope.attention_scaling ?? 1;
  for (let t = 0; t < s; t++) {
    for (let i = 0; i < half; i++) {
      let a;
      if (rope.angles === "bf16") {
        a = Math.fround(bf16(bf16(positions[t]) * bf16(Math.fround(inv[i]))));
        cos[t * half + i] = Math.fround(Math.cos(a));
        sin[t * half + i] = Math.fround(Math.sin(a));
      } else {
        a = positions[t] * inv[i];
        cos[t * half + i] = Math.cos(a) * scale;
        sin[t * half + i] = Math.sin(a) * scale;
      }
    }
  }
  return { cos, sin, half };
}

// rotate x (s x dh, one head) in place: dims first .. first + r, pairs by layout
function rotate_head(x, s, dh, rope, tables) {
  const { cos, sin, half } = tables;
  const first = rope.first || 0;
  const inter = rope.layout === "interleaved";
  for (let t = 0; t < s; t++) {
    const o = t * dh + first;
    for (let i = 0; i < half; i++) {
      const j = inter ? o + 2 * i : o + i;
      const k = inter ? j + 1 : o + i + half;
      const c = cos[t * half + i];
      const n = sin[t * half + i];
      const a = x[j];
      const b = x[k];
      x[j] = a * c - b * n;
      x[k] = b * c + a * n;
    }
  }
}

// xPos's query and key scales (posenc_core.rope.xpos.xpos_scales, centred as ByteLM's _XPos)
function xpos_scales(xpos, positions, dh) {
  const s = positions.length;
  let lo = Infinity;
  let hi = -Infinity;
  for (const p of positions) { lo = Math.min(lo, p); hi = Math.max(hi, p); }
  const center = Math.floor((lo + hi + 1) / 2);
  const half = dh / 2;
  const qs = new Float64Array(s * dh);
  const ks = new Float64Array(s * dh);
  for (let t = 0; t < s; t++) {
    for (let i = 0; i < half; i++) {
      const zeta = ((2 * i) / dh + xpos.gamma) / (1 + xpos.gamma);
      const lq = ((positions[t] - center) / xpos.scale_base) * Math.log(zeta);
      qs[t * dh + i] = qs[t * dh + i + half] = Math.exp(lq);
      ks[t * dh + i] = ks[t * dh + i + half] = Math.exp(-lq);
    }
  }
  return { qs, ks };
}

// ---------------------------------------------------------------------------- arithmetic

function layer_norm(x, s, d, g, b) {
  const y = new Float64Array(s * d);
  for (let t = 0; t < s; t++) {
    const o = t * d;
    let mean = 0;
    for (let i = 0; i < d; i++) mean += x[o + i];
    mean /= d;
    let v = 0;
    for (let i = 0; i < d; i++) { const c = x[o + i] - mean; v += c * c; }
    const r = 1 / Math.sqrt(v / d + LN_EPS);
    for (let i = 0; i < d; i++) y[o + i] = (x[o + i] - mean) * r * g[i] + b[i];
  }
  return y;
}

// y (s x n) = x (s x m) W^T + b, W (n x m) as nn.Linear stores it; two rows of x by four rows
// of W at a time (eight sums in registers: each value read from memory serves two or four
// products). A row past the end repeats the last one and is not stored.
function linear(x, s, m, W, b, n) {
  const y = new Float64Array(s * n);
  for (let t = 0; t < s; t += 2) {
    const x0 = t * m;
    const x1 = Math.min(t + 1, s - 1) * m;
    const two = t + 1 < s;
    for (let o = 0; o < n; o += 4) {
      const w0 = o * m;
      const w1 = Math.min(o + 1, n - 1) * m;
      const w2 = Math.min(o + 2, n - 1) * m;
      const w3 = Math.min(o + 3, n - 1) * m;
      let a0 = 0, a1 = 0, a2 = 0, a3 = 0, c0 = 0, c1 = 0, c2 = 0, c3 = 0;
      for (let i = 0; i < m; i++) {
        const u = x[x0 + i];
        const v = x[x1 + i];
        const p = W[w0 + i];
        const q = W[w1 + i];
        const r = W[w2 + i];
        const z = W[w3 + i];
        a0 += u * p; a1 += u * q; a2 += u * r; a3 += u * z;
        c0 += v * p; c1 += v * q; c2 += v * r; c3 += v * z;
      }
      const y0 = t * n + o;
      const y1 = y0 + n;
      y[y0] = a0 + (b ? b[o] : 0);
      if (two) y[y1] = c0 + (b ? b[o] : 0);
      if (o + 1 < n) { y[y0 + 1] = a1 + (b ? b[o + 1] : 0); if (two) y[y1 + 1] = c1 + (b ? b[o + 1] : 0); }
      if (o + 2 < n) { y[y0 + 2] = a2 + (b ? b[o + 2] : 0); if (two) y[y1 + 2] = c2 + (b ? b[o + 2] : 0); }
      if (o + 3 < n) { y[y0 + 3] = a3 + (b ? b[o + 3] : 0); if (two) y[y1 + 3] = c3 + (b ? b[o + 3] : 0); }
    }
  }
  return y;
}

// erf to about 1e-15 (W. J. Cody's rational approximations, as in most libms)
export function erf(x) {
  const ax = Math.abs(x);
  if (ax < 0.5) {
    const t = x * x;
    const p = 3.209377589138469472562e3 + t * (3.774852376853020208137e2 + t * (1.138641541510501556495e2 + t * (3.161123743870565596947e0 + t * 1.857777061846031526730e-1)));
    const q = 2.844236833439170622273e3 + t * (1.282616526077372275645e3 + t * (2.440246379344441733056e2 + t * (2.360129095234412093499e1 + t)));
    return (x * p) / q;
  }
  return x < 0 ? -1 + erfc_pos(ax) : 1 - erfc_pos(ax);
}

function erfc_pos(x) {
  let r;
  if (x < 4) {
    const p = 1.23033935479799725272e3 + x * (2.05107837782607146532e3 + x * (1.71204761263407058314e3 + x * (8.81952221241769090411e2 + x * (2.98635138197400131132e2 + x * (6.61191906371416294775e1 + x * (8.88314979438837594118e0 + x * (5.64188496988670089180e-1 + x * 2.15311535474403846343e-8)))))));
    const q = 1.23033935480374942043e3 + x * (3.43936767414372163696e3 + x * (4.36261909014324715820e3 + x * (3.29079923573345962678e3 + x * (1.62138957456669018874e3 + x * (5.37181101862009857509e2 + x * (1.17693950891312499305e2 + x * (1.57449261107098347253e1 + x)))))));
    r = p / q;
  } else {
    const z = 1 / (x * x);
    const p = 6.58749161529837803157e-4 + z * (1.60837851487422766278e-2 + z * (1.25781726111229246204e-1 + z * (3.60344899949804439429e-1 + z * (3.05326634961232344035e-1 + z * 1.63153871373020978498e-2))));
    const q = 2.33520497626869185443e-3 + z * (6.05183413124413191178e-2 + z * (5.27905102951428412248e-1 + z * (1.87295284992346725209e0 + z * (2.56852019228982242072e0 + z))));
    r = (0.56418958354775628695 - (z * p) / q) / x;
  }
  return Math.exp(-x * x) * r;
}

// ---------------------------------------------------------------------------- the pass

// the additive bias of head hd at each distance i - j = 0 .. s - 1 (ALiBi or T5), or null
function scheme_bias(arch, w, hd, s) {
  const b = arch.bias;
  if (!b) return null;
  const out = new Float64Array(s);
  if (b.kind === "alibi") {
    for (let n = 0; n < s; n++) out[n] = -b.slopes[hd] * n;
    return out;
  }
  if (b.kind === "t5") {
    const table = w["bias.bias.relative_attention_bias.weight"];  // (buckets, h)
    const buckets = b.buckets;  // bucket of each distance 0 .. buckets.length - 1
    const last = buckets[buckets.length - 1];
    for (let n = 0; n < s; n++) out[n] = table[(n < buckets.length ? buckets[n] : last) * arch.n_heads + hd];
    return out;
  }
  throw new RangeError(`unknown bias ${b.kind}`);
}

// exp(x) for x <= 0 to about 1e-8 relative (float32's exp is good to 1e-7), faster than
// Math.exp: x = k ln 2 + r with |r| <= ln(2) / 2, exp(r) by its Taylor series to r^7 (the next
// term is below 6e-9), times 2^k from a table
const LN2_HI = 6.93147180369123816490e-1;
const LN2_LO = 1.90821492927058770002e-10;
const POW2 = Float64Array.from({ length: 1076 }, (_, k) => Math.pow(2, -k));  // 2^-k
export function exp_negative(x) {
  if (!(x > -745)) return x === x ? 0 : NaN;
  const k = Math.floor(x * Math.LOG2E + 0.5);  // k <= 0
  const r = x - k * LN2_HI - k * LN2_LO;
  const p = 1 + r * (1 + r * (0.5 + r * (1 / 6 + r * (1 / 24 + r * (1 / 120 + r * (1 / 720 + r / 5040))))));
  return p * POW2[-k];
}

// one query's scores against keys lo .. i into row (times scale), for head width 16, and the
// largest of them and top: the query held in locals, so each key costs 16 loads (the generic
// loop reloads the query too)
function scores16(q, qi, k, lo, i, row, scale, top) {
  const q0 = q[qi + 0], q1 = q[qi + 1], q2 = q[qi + 2], q3 = q[qi + 3], q4 = q[qi + 4], q5 = q[qi + 5], q6 = q[qi + 6], q7 = q[qi + 7], q8 = q[qi + 8], q9 = q[qi + 9], q10 = q[qi + 10], q11 = q[qi + 11], q12 = q[qi + 12], q13 = q[qi + 13], q14 = q[qi + 14], q15 = q[qi + 15];
  for (let j = lo; j <= i; j++) {
    const kj = j * 16;
    const v = (q0 * k[kj + 0] + q1 * k[kj + 1] + q2 * k[kj + 2] + q3 * k[kj + 3] + q4 * k[kj + 4] + q5 * k[kj + 5] + q6 * k[kj + 6] + q7 * k[kj + 7] + q8 * k[kj + 8] + q9 * k[kj + 9] + q10 * k[kj + 10] + q11 * k[kj + 11] + q12 * k[kj + 12] + q13 * k[kj + 13] + q14 * k[kj + 14] + q15 * k[kj + 15]) * scale;
    row[j] = v;
    if (v > top) top = v;
  }
  return top;
}

// scores16 for any head width; returns max(top, the scores)
function generic_scores(q, qi, k, lo, i, row, scale, dh, top = -Infinity) {
  for (let j = lo; j <= i; j++) {
    let dot = 0;
    for (let c = 0; c < dh; c++) dot += q[qi + c] * k[j * dh + c];
    row[j] = dot * scale;
    if (row[j] > top) top = row[j];
  }
  return top;
}

// y[out .. out + 16] = scale * sum over keys lo .. i of row[j] v_j, for head width 16, in locals
function mix16(row, v, lo, i, y, out, scale) {
  let a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0, a8 = 0, a9 = 0, a10 = 0, a11 = 0, a12 = 0, a13 = 0, a14 = 0, a15 = 0;
  for (let j = lo; j <= i; j++) {
    const wj = row[j];
    const vj = j * 16;
    a0 += wj * v[vj + 0];
    a1 += wj * v[vj + 1];
    a2 += wj * v[vj + 2];
    a3 += wj * v[vj + 3];
    a4 += wj * v[vj + 4];
    a5 += wj * v[vj + 5];
    a6 += wj * v[vj + 6];
    a7 += wj * v[vj + 7];
    a8 += wj * v[vj + 8];
    a9 += wj * v[vj + 9];
    a10 += wj * v[vj + 10];
    a11 += wj * v[vj + 11];
    a12 += wj * v[vj + 12];
    a13 += wj * v[vj + 13];
    a14 += wj * v[vj + 14];
    a15 += wj * v[vj + 15];
  }
  y[out + 0] = a0 * scale;
  y[out + 1] = a1 * scale;
  y[out + 2] = a2 * scale;
  y[out + 3] = a3 * scale;
  y[out + 4] = a4 * scale;
  y[out + 5] = a5 * scale;
  y[out + 6] = a6 * scale;
  y[out + 7] = a7 * scale;
  y[out + 8] = a8 * scale;
  y[out + 9] = a9 * scale;
  y[out + 10] = a10 * scale;
  y[out + 11] = a11 * scale;
  y[out + 12] = a12 * scale;
  y[out + 13] = a13 * scale;
  y[out + 14] = a14 * scale;
  y[out + 15] = a15 * scale;
}

// permute the query and key rows of a fused qkv weight (3d x d) or bias (3d) within each head:
// new row r of a head = old row perm[r] (lab.py's layout bugs)
function permute_qk(t, d, n_heads, perm, cols) {
  const out = Float64Array.from(t);
  const dh = d / n_heads;
  for (let part = 0; part < 2; part++) {
    for (let hd = 0; hd < n_heads; hd++) {
      for (let r = 0; r < dh; r++) {
        const to = part * d + hd * dh + r;
        const from = part * d + hd * dh + perm[r];
        for (let c = 0; c < cols; c++) out[to * cols + c] = t[from * cols + c];
      }
    }
  }
  return out;
}

// Next-byte logits (s x 256, Float64Array) of `tokens` (bytes, length s >= 1) under `run`;
// with `want = {layer, head}` also that head's attention weights (s x s, row i over keys 0 .. i),
// with `want = {layer}` every head's of that layer (maps[head]), with `want = "all"` every head's
// of every layer (maps[layer][head])
export function forward(model, tokens, run = {}, want = null) {
  const { arch, w } = model;
  const s = tokens.length;
  const d = arch.d_model;
  const h = arch.n_heads;
  const dh = d / h;
  const plan = run.layers || arch.layers;
  if (s < 1) throw new RangeError("tokens must hold at least one byte");
  if (plan.length !== arch.layers.length) throw new RangeError(`run has ${plan.length} layers, the model ${arch.layers.length}`);
  const positions = run_positions(run, s);
  // embeddings, scaled as the scheme says, plus the position table
  const E = w["embed.weight"];
  let x = new Float64Array(s * d);
  for (let t = 0; t < s; t++) {
    const b = tokens[t];
    if (!(b >= 0 && b < VOCAB)) throw new RangeError(`tokens must be bytes 0 .. 255, got ${b} at ${t}`);
    for (let i = 0; i < d; i++) x[t * d + i] = E[b * d + i] * arch.embed_scale;
  }
  if (arch.table) add_table(x, arch, w, positions);
  let attn = null;
  for (let l = 0; l < plan.length; l++) {
    const p = `blocks.${l}.`;
    const layer = plan[l];
    const a = layer_norm(x, s, d, w[p + "ln1.weight"], w[p + "ln1.bias"]);
    let W = w[p + "attn.qkv.weight"];
    let B = w[p + "attn.qkv.bias"];
    if (run.qk_weight_perm) W = permute_qk(W, d, h, run.qk_weight_perm, d);
    if (run.qk_bias_perm) B = permute_qk(B, d, h, run.qk_bias_perm, 1);
    const qkv = linear(a, s, d, W, B, 3 * d);
    const tables = layer.rope ? rotation_tables(layer.rope, positions, positions.reduce((m, v) => Math.max(m, v), 0) + 1) : null;
    const xs = layer.rope && layer.rope.xpos ? xpos_scales(layer.rope.xpos, positions, dh) : null;
    const y = new Float64Array(s * d);
    const sinks = layer.sinks ? w[p + "attn.sinks"] : null;
    const keep = want === "all" || (want != null && want.layer === l);
    const every = want === "all" || (want != null && want.head == null);
    const maps = [];
    for (let hd = 0; hd < h; hd++) {
      const q = new Float64Array(s * dh);
      const k = new Float64Array(s * dh);
      const v = new Float64Array(s * dh);
      for (let t = 0; t < s; t++) {
        for (let i = 0; i < dh; i++) {
          q[t * dh + i] = qkv[t * 3 * d + hd * dh + i];
          k[t * dh + i] = qkv[t * 3 * d + d + hd * dh + i];
          v[t * dh + i] = qkv[t * 3 * d + 2 * d + hd * dh + i];
        }
      }
      if (layer.rope) {
        rotate_head(q, s, dh, layer.rope, tables);
        rotate_head(k, s, dh, layer.rope, tables);
      }
      if (xs) for (let i = 0; i < s * dh; i++) { q[i] *= xs.qs[i]; k[i] *= xs.ks[i]; }
      if (layer.temperature) {
        const T = layer.temperature;
        for (let t = 0; t < s; t++) {
          const pos = T.positions === "cache" ? t : positions[t];
          const f = 1 + T.scale * Math.log1p(Math.floor((pos + T.offset) / T.step));
          for (let i = 0; i < dh; i++) q[t * dh + i] *= f;
        }
      }
      const bias = scheme_bias(arch, w, hd, s);
      const map = keep && (every || want.head === hd) ? new Float32Array(s * s) : null;
      const scale = 1 / Math.sqrt(dh);
      const row = new Float64Array(s);
      for (let i = 0; i < s; i++) {
        let lo = 0;
        if (layer.window) lo = Math.max(0, i - layer.window + 1);
        else if (layer.chunk) lo = i - (i % layer.chunk);
        if (run.doc_len) lo = Math.max(lo, i - (i % run.doc_len));  // a document mask
        let top = sinks ? sinks[hd] : -Infinity;
        const qi = i * dh;
        if (bias) {  // scores plus the bias of each distance, then their maximum
          if (dh === 16) scores16(q, qi, k, lo, i, row, scale, -Infinity);
          else generic_scores(q, qi, k, lo, i, row, scale, dh);
          for (let j = lo; j <= i; j++) {
            row[j] += bias[i - j];
            if (row[j] > top) top = row[j];
          }
        } else if (dh === 16) top = scores16(q, qi, k, lo, i, row, scale, top);
        else top = generic_scores(q, qi, k, lo, i, row, scale, dh, top);
        let sum = sinks ? Math.exp(sinks[hd] - top) : 0;
        for (let j = lo; j <= i; j++) { const e = exp_negative(row[j] - top); row[j] = e; sum += e; }
        const inv = 1 / sum;  // the weights are row[j] / sum
        if (map) for (let j = lo; j <= i; j++) map[i * s + j] = row[j] * inv;
        const out = i * d + hd * dh;
        if (dh === 16) mix16(row, v, lo, i, y, out, inv);
        else {
          for (let c = 0; c < dh; c++) {
            let a = 0;
            for (let j = lo; j <= i; j++) a += row[j] * v[j * dh + c];
            y[out + c] = a * inv;
          }
        }
      }
      if (map) maps.push(map);
    }
    if (want === "all") (attn ||= []).push(maps);
    else if (maps.length) attn = every ? maps : maps[0];
    const o = linear(y, s, d, w[p + "attn.proj.weight"], w[p + "attn.proj.bias"], d);
    for (let i = 0; i < s * d; i++) x[i] += o[i];
    const m = layer_norm(x, s, d, w[p + "ln2.weight"], w[p + "ln2.bias"]);
    const f = linear(m, s, d, w[p + "fc.weight"], w[p + "fc.bias"], 4 * d);
    for (let i = 0; i < f.length; i++) f[i] = 0.5 * f[i] * (1 + erf(f[i] * Math.SQRT1_2));
    const u = linear(f, s, 4 * d, w[p + "out.weight"], w[p + "out.bias"], d);
    for (let i = 0; i < s * d; i++) x[i] += u[i];
  }
  x = layer_norm(x, s, d, w["ln_f.weight"], w["ln_f.bias"]);
  const logits = linear(x, s, d, E, null, VOCAB);  // tied head
  return { logits, attention: attn };
}

// the position table added to the embeddings (sinusoidal or learned), rows at `positions`
function add_table(x, arch, w, positions) {
  const d = arch.d_model;
  const tab = arch.table;
  const s = positions.length;
  if (tab.kind === "learned") {
    const P = w["pos.weight"];
    for (let t = 0; t < s; t++) {
      if (positions[t] >= tab.rows) throw new RangeError(`the learned table has ${tab.rows} rows; position ${positions[t]} is past it`);
      for (let i = 0; i < d; i++) x[t * d + i] += P[positions[t] * d + i];
    }
    return;
  }
  if (tab.kind !== "sinusoidal") throw new RangeError(`unknown table ${tab.kind}`);
  for (let t = 0; t < s; t++) {
    for (let i = 0; i < d / 2; i++) {
      const a = positions[t] * Math.pow(tab.base, -(2 * i) / d);
      x[t * d + 2 * i] += Math.fround(Math.sin(a)) * tab.scale;
      x[t * d + 2 * i + 1] += Math.fround(Math.cos(a)) * tab.scale;
    }
  }
}

// ---------------------------------------------------------------------------- readouts

// loss (nats) of each next byte: s - 1 values, entry t predicts tokens[t + 1] from 0 .. t
export function loss_per_byte(logits, tokens) {
  const s = tokens.length;
  const out = new Float64Array(Math.max(s - 1, 0));
  for (let t = 0; t + 1 < s; t++) out[t] = log_sum_exp(logits, t) - logits[t * VOCAB + tokens[t + 1]];
  return out;
}

function log_sum_exp(logits, t) {
  let top = -Infinity;
  for (let c = 0; c < VOCAB; c++) top = Math.max(top, logits[t * VOCAB + c]);
  let sum = 0;
  for (let c = 0; c < VOCAB; c++) sum += Math.exp(logits[t * VOCAB + c] - top);
  return top + Math.log(sum);
}

// the k most likely next bytes at every position: {bytes: Uint8Array(s k), probs: Float32Array(s k)}
export function top_k(logits, s, k = 5) {
  const bytes = new Uint8Array(s * k);
  const probs = new Float32Array(s * k);
  for (let t = 0; t < s; t++) {
    const lse = log_sum_exp(logits, t);
    const best = [];
    for (let c = 0; c < VOCAB; c++) {
      const v = logits[t * VOCAB + c];
      if (best.length < k || v > best[best.length - 1][1]) {
        best.push([c, v]);
        best.sort((p, q) => q[1] - p[1] || p[0] - q[0]);
        if (best.length > k) best.pop();
      }
    }
    best.forEach(([c, v], r) => { bytes[t * k + r] = c; probs[t * k + r] = Math.exp(v - lse); });
  }
  return { bytes, probs };
}

// ---------------------------------------------------------------------------- the lab's spec

// layers stored as [rope index, window, chunk, temperature index, sinks] (lab.py's _compact)
export function expand_layers(spec, compact) {
  return compact.map(([r, window, chunk, t, sinks]) => ({
    rope: r < 0 ? null : spec.ropes[r],
    window: window || null,
    chunk: chunk || null,
    temperature: t < 0 ? null : spec.temperatures[t],
    sinks: Boolean(sinks),
  }));
}

// the architecture of one model of the spec, layers expanded, for load_model
export function model_arch(spec, entry) {
  return { ...entry, layers: expand_layers(spec, entry.layers) };
}

// the run of `change` on one model of the spec, layers expanded, for forward
export function resolve_run(spec, entry, change) {
  const run = entry.runs[change];
  if (!run) throw new RangeError(`${entry.name} has no change ${change}`);
  return { ...run, layers: expand_layers(spec, run.layers || entry.layers) };
}
