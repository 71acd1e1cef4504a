// The model lab (posenc_core.book.widgets.lab): the book's trained byte models run in the
// reader's browser on any text, with a scaling method or a shipped bug applied.
//
// anywidget loads this module (`export default { render }`). The widget's `spec` lists the models
// (architecture, checkpoint file and SHA-256, the runs of every change), `engine` is bytelm.js's
// source, `values` the controls (synced with Python when a kernel is attached) and
// `weights_base` where a static page finds the checkpoints. The forward passes run in a module
// worker made from `engine`, so the page answers input while they compute; where a worker cannot
// start, they run in the page. Weights come from the kernel when there is one (a custom message
// answered with the checkpoint's bytes) and from `weights_base` in the static book.
//
// Hooks for tests: the root has the classes `posenc-explorer posenc-lab`; each control has
// `posenc-control` and `data-param`; the root's `posenc` property holds `values`, `data` (change,
// reference, loss, ref_loss, top, ref_top, ms, bytes) and `ready` (a promise of the first result).

const COLORS = { change: "#D55E00", reference: "#0072B2" };
const INK = "#222";
const MUTED = "#666";
const FONT = "12px system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif";
const SMOOTH = 16; // bytes in the running mean drawn over each loss curve
const LOSS_TOP = 8; // nats: the loss axis stops here (ln 256 = 5.5 is a uniform guess)

const WORKER_MAIN = `
const models = new Map();
// a few short passes right after loading, so that the reader's first pass runs optimised code
function warm(model) {
  const tokens = new Uint8Array(96).map((_, i) => 32 + (i * 7) % 90);
  for (let r = 0; r < 3; r++) forward(model, tokens, { layers: model.arch.layers }, { layer: 0 });
}
function handle(m) {
  try {
    if (m.kind === "ping") return { kind: "pong" };
    if (m.kind === "load") {
      const model = load_model(m.arch, parse_safetensors(m.buffer));
      warm(model);
      models.set(m.name, model);
      return { kind: "loaded", name: m.name };
    }
    const model = models.get(m.name);
    if (!model) throw new Error("weights of " + m.name + " not loaded");
    const t0 = performance.now();
    const out = forward(model, m.tokens, m.run, m.layer == null ? null : { layer: m.layer });
    return { kind: "pass", id: m.id, role: m.role, loss: loss_per_byte(out.logits, m.tokens),
             top: top_k(out.logits, m.tokens.length, 5), maps: out.attention, ms: performance.now() - t0 };
  } catch (err) {
    return { kind: "error", id: m.id, role: m.role, name: m.name, message: String((err && err.message) || err) };
  }
}
if (typeof WorkerGlobalScope !== "undefined" && self instanceof WorkerGlobalScope) {
  self.onmessage = (e) => self.postMessage(handle(e.data));
}
export { handle };
`;

// ---------------------------------------------------------------------------- the engine

// a worker (or, failing that, the same code in the page) answering {kind: "load" | "run"}
async function start_engine(source, on_message) {
  const code = source + "\n" + WORKER_MAIN;
  const url = URL.createObjectURL(new Blob([code], { type: "text/javascript" }));
  try {
    const worker = new Worker(url, { type: "module" });
    await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("worker silent")), 4000);
      worker.onerror = (e) => { clearTimeout(timer); reject(e); };
      worker.onmessage = (e) => { clearTimeout(timer); resolve(e.data); };
      worker.postMessage({ kind: "ping" });
    });
    worker.onmessage = (e) => on_message(e.data);
    worker.onerror = (e) => on_message({ kind: "error", message: String(e.message || e) });
    return { post: (m, transfer) => worker.postMessage(m, transfer || []), where: "a worker" };
  } catch (err) {
    const mod = await import(url);  // no worker: compute in the page, one pass per task
    return { post: (m) => setTimeout(() => on_message(mod.handle(m)), 0), where: "the page" };
  }
}

function hex(buffer) {
  return Array.from(new Uint8Array(buffer), (b) => b.toString(16).padStart(2, "0")).join("");
}

// the checkpoint's bytes: from the kernel when there is one, else from the static book
async function fetch_weights(model, base, entry) {
  const static_page = !!document.querySelector('script[type="application/vnd.jupyter.widget-state+json"]');
  let buffer;
  if (static_page) {
    const res = await fetch(new URL(base + entry.file, document.baseURI));
    if (!res.ok) throw new Error(`${entry.file}: HTTP ${res.status}`);
    buffer = await res.arrayBuffer();
  } else {
    buffer = await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("the kernel did not send the weights: run the cell again")), 30000);
      const on = (msg, buffers) => {
        if (!msg || msg.kind !== "weights" || msg.model !== entry.name) return;
        clearTimeout(timer);
        model.off("msg:custom", on);
        const b = buffers && buffers[0];
        if (!b) return reject(new Error("no weights in the kernel's answer"));
        resolve(b instanceof ArrayBuffer ? b : b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength));
      };
      model.on("msg:custom", on);
      model.send({ kind: "weights", model: entry.name });
    });
  }
  if (buffer.byteLength !== entry.bytes) throw new Error(`${entry.file}: ${buffer.byteLength} bytes, expected ${entry.bytes}`);
  if (globalThis.crypto && crypto.subtle) {
    const sha = hex(await crypto.subtle.digest("SHA-256", buffer));
    if (sha !== entry.sha256) throw new Error(`${entry.file}: SHA-256 ${sha.slice(0, 12)}…, expected ${entry.sha256.slice(0, 12)}…`);
  }
  return buffer;
}

// ---------------------------------------------------------------------------- helpers

function element(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else node.setAttribute(k, v);
  }
  for (const c of children) node.append(c);
  return node;
}

// a byte as the reader can see it
export function show_byte(b) {
  if (b === 10) return "\\n";
  if (b === 9) return "\\t";
  if (b === 32) return "␣";
  if (b < 32 || b === 127) return `\\x${b.toString(16).padStart(2, "0")}`;
  if (b >= 128) return `\\x${b.toString(16)}`;
  return String.fromCharCode(b);
}

function mean(a, lo, hi) {
  let s = 0;
  let n = 0;
  for (let i = Math.max(lo, 0); i < Math.min(hi, a.length); i++) { s += a[i]; n++; }
  return n ? s / n : NaN;
}

function running_mean(a, w) {
  const out = new Float64Array(a.length);
  let s = 0;
  for (let i = 0; i < a.length; i++) {
    s += a[i];
    if (i >= w) s -= a[i - w];
    out[i] = s / Math.min(i + 1, w);
  }
  return out;
}

function change_of(v, entry) {
  if (v.bug !== "none") return `bug:${v.bug}`;
  if (v.method === "none") return "none";
  const c = `${v.method}:${v.factor}`;
  return entry.study === "mix" ? `${c}:${v.where}` : c;
}

function canvas_2d(canvas, width, height) {
  const dpr = window.devicePixelRatio || 1;
  canvas.width = Math.round(width * dpr);
  canvas.height = Math.round(height * dpr);
  canvas.style.width = `${width}px`;
  canvas.style.height = `${height}px`;
  const ctx = canvas.getContext("2d");
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, width, height);
  ctx.fillStyle = "#fff";
  ctx.fillRect(0, 0, width, height);
  ctx.font = FONT;
  return ctx;
}

// ---------------------------------------------------------------------------- drawing

function draw_loss(canvas, width, data, pointer, train_len) {
  const height = width < 480 ? 190 : 230;
  const ctx = canvas_2d(canvas, width, height);
  const pad = { l: 34, r: 8, t: 10, b: 30 };
  const W = width - pad.l - pad.r;
  const H = height - pad.t - pad.b;
  const n = data.loss.length;  // the loss at position t is that of byte t + 1, read after 0 .. t
  const X = (t) => pad.l + (W * t) / Math.max(n - 1, 1);
  const Y = (v) => pad.t + H * (1 - Math.min(Math.max(v, 0), LOSS_TOP) / LOSS_TOP);
  ctx.strokeStyle = "#ddd";
  ctx.fillStyle = MUTED;
  ctx.textAlign = "right";
  ctx.textBaseline = "middle";
  for (let v = 0; v <= LOSS_TOP; v += 2) {
    ctx.beginPath(); ctx.moveTo(pad.l, Y(v)); ctx.lineTo(pad.l + W, Y(v)); ctx.stroke();
    ctx.fillText(String(v), pad.l - 4, Y(v));
  }
  ctx.textAlign = "center";
  ctx.textBaseline = "top";
  const step = n > 256 ? 128 : n > 96 ? 64 : 16;
  for (let t = 0; t < n; t += step) ctx.fillText(String(t), X(t), pad.t + H + 4);
  ctx.fillText("position (loss of the next byte, nats; lines: mean of 16)", pad.l + W / 2, pad.t + H + 16);
  if (train_len < n) {  // the trained length, shaded as in the book's loss figures
    ctx.fillStyle = "rgba(0, 114, 178, 0.10)";
    ctx.fillRect(X(0), pad.t, X(train_len) - X(0), H);
    ctx.strokeStyle = "#999";
    ctx.setLineDash([4, 3]);
    ctx.beginPath(); ctx.moveTo(X(train_len), pad.t); ctx.lineTo(X(train_len), pad.t + H); ctx.stroke();
    ctx.setLineDash([]);
    ctx.fillStyle = MUTED;
    ctx.textAlign = "left";
    ctx.fillText(`L = ${train_len}`, X(train_len) + 3, pad.t + 2);
  }
  const curves = data.change === data.reference ? [["change", data.loss]] : [["reference", data.ref_loss], ["change", data.loss]];
  for (const [name, loss] of curves) {
    ctx.fillStyle = COLORS[name] + "55";
    for (let t = 0; t < n; t++) ctx.fillRect(X(t) - 0.75, Y(loss[t]) - 0.75, 1.5, 1.5);
  }
  for (const [name, loss] of curves) {
    const m = running_mean(loss, SMOOTH);
    ctx.strokeStyle = COLORS[name];
    ctx.lineWidth = name === "change" ? 2 : 2.5;
    if (name === "reference") ctx.setLineDash([5, 3]);
    ctx.beginPath();
    for (let t = 0; t < n; t++) (t ? ctx.lineTo : ctx.moveTo).call(ctx, X(t), Y(m[t]));
    ctx.stroke();
    ctx.setLineDash([]);
    ctx.lineWidth = 1;
  }
  if (pointer != null && pointer < n) {
    ctx.strokeStyle = INK;
    ctx.beginPath(); ctx.moveTo(X(pointer), pad.t); ctx.lineTo(X(pointer), pad.t + H); ctx.stroke();
  }
  return { t_of: (x) => Math.round(((x - pad.l) * (n - 1)) / W) };
}

function draw_attention(canvas, width, map, s, pointer) {
  const size = Math.max(120, Math.min(width, 360));
  const ctx = canvas_2d(canvas, size, size);
  if (!map) return;
  const dpr = window.devicePixelRatio || 1;
  const N = Math.round(size * dpr);
  const img = ctx.createImageData(N, N);
  for (let py = 0; py < N; py++) {
    const i0 = Math.floor((py * s) / N);
    const i1 = Math.max(i0 + 1, Math.floor(((py + 1) * s) / N));
    for (let px = 0; px < N; px++) {
      const j0 = Math.floor((px * s) / N);
      const j1 = Math.max(j0 + 1, Math.floor(((px + 1) * s) / N));
      let top = 0;
      for (let i = i0; i < i1; i++) for (let j = j0; j < j1; j++) top = Math.max(top, map[i * s + j]);
      const v = Math.sqrt(top);  // colour: the square root of the largest weight in the pixel
      const o = (py * N + px) * 4;
      img.data[o] = Math.round(255 - 255 * v);
      img.data[o + 1] = Math.round(255 - 141 * v);
      img.data[o + 2] = Math.round(255 - 77 * v);
      img.data[o + 3] = 255;
    }
  }
  ctx.putImageData(img, 0, 0);
  if (pointer != null && pointer < s) {
    const y = ((pointer + 0.5) * size) / s;
    ctx.strokeStyle = COLORS.change;
    ctx.beginPath(); ctx.moveTo(0, y); ctx.lineTo(size, y); ctx.stroke();
  }
}

// ---------------------------------------------------------------------------- the widget

function render({ model, el }) {
  const spec = model.get("spec");
  const engine_source = model.get("engine");
  const base = model.get("weights_base");
  const by_name = new Map(spec.models.map((m) => [m.name, m]));
  const state = {
    values: { ...model.get("values") },
    pointer: null,
    data: null,
    loaded: new Map(),  // name -> promise
    waiting: new Map(),  // name -> the promise's resolve and reject while the worker loads
    pending: null,  // the request whose passes are computing, and how many are still out
    next: null,  // the newest request that came meanwhile
    kept: { change: null, ref: null },  // the newest pass of each kind, for requests that need no new one
    id: 0,
    engines: null,
    where: "",
  };
  const root = element("div", { class: "posenc-explorer posenc-lab", role: "group", "aria-label": "The model lab" });
  let resolve_ready;
  let reject_ready;
  const ready = new Promise((resolve, reject) => { resolve_ready = resolve; reject_ready = reject; });
  ready.catch(() => {});  // a failed start is reported in the status line and the console
  root.posenc = { values: state.values, data: null, ready };

  // ------------------------------------------------------------------ controls
  const controls = element("div", { class: "posenc-controls" });
  const control = (name, label) => {
    const row = element("div", { class: "posenc-control", "data-param": name });
    row.append(element("span", { class: "posenc-control-label", text: label }));
    controls.append(row);
    return row;
  };
  const buttons = (row, name, options) => {
    const box = element("div", { class: "posenc-buttons" });
    const out = new Map();
    for (const [value, label] of options) {
      const b = element("button", { type: "button", class: "posenc-button", "data-value": String(value) }, label);
      b.addEventListener("click", () => set({ [name]: value }));
      box.append(b);
      out.set(String(value), b);
    }
    row.append(box);
    return out;
  };

  const model_row = control("model", "Model");
  const model_select = element("select", { class: "posenc-select", "aria-label": "Model" });
  for (const [study, title] of [["lm", "2 layers (chapters 5, 7, 8)"], ["mix", "4 layers, mixed (chapter 10)"]]) {
    const group = element("optgroup", { label: title });
    for (const m of spec.models.filter((x) => x.study === study)) group.append(element("option", { value: m.name }, m.label));
    model_select.append(group);
  }
  model_select.addEventListener("change", () => set({ model: model_select.value }));
  model_row.append(model_select);

  const method_buttons = buttons(control("method", "Scaling"), "method",
    [["none", "none"], ...spec.methods.map((m) => [m.key, m.label])]);
  const factor_row = control("factor", "Factor");
  const factor_box = element("div", { class: "posenc-buttons" });
  factor_row.append(factor_box);
  const where_buttons = buttons(control("where", "Where"), "where",
    spec.where.map((w) => [w, w === "global" ? "global layers" : "every layer"]));
  const bug_row = control("bug", "Bug");
  const bug_select = element("select", { class: "posenc-select", "aria-label": "Bug" });
  bug_select.addEventListener("change", () => set({ bug: bug_select.value }));
  bug_row.append(bug_select);
  const bug_note = element("div", { class: "posenc-lab-note" });
  bug_row.append(bug_note);

  const text_row = control("text", "Text");
  const area = element("textarea", { class: "posenc-lab-text", rows: "4", spellcheck: "false", "aria-label": "Text the model reads" });
  const counter = element("span", { class: "posenc-lab-note" });
  const another = element("button", { type: "button", class: "posenc-button" }, "another excerpt");
  another.addEventListener("click", () => set({ excerpt: (state.values.excerpt + 1) % spec.excerpts.length, text: null }));
  const text_box = element("div", { class: "posenc-lab-textbox" }, area, element("div", { class: "posenc-buttons" }, another, counter));
  text_row.append(text_box);
  let typing = null;
  area.addEventListener("input", () => {
    clearTimeout(typing);
    typing = setTimeout(() => set({ text: area.value }), 120);
  });

  // ------------------------------------------------------------------ views
  const status = element("div", { class: "posenc-frame-label", "aria-live": "polite" });
  const legend = element("div", { class: "posenc-lab-legend" });
  const loss_canvas = element("canvas", { class: "posenc-canvas posenc-lab-loss", role: "img", tabindex: "0" });
  const summary = element("div", { class: "posenc-frame-label posenc-lab-summary" });
  const next = element("div", { class: "posenc-lab-next", "aria-live": "polite" });
  const layer_row = element("div", { class: "posenc-control", "data-param": "layer" }, element("span", { class: "posenc-control-label", text: "Layer" }));
  const layer_box = element("div", { class: "posenc-buttons" });
  layer_row.append(layer_box);
  const head_row = element("div", { class: "posenc-control", "data-param": "head" }, element("span", { class: "posenc-control-label", text: "Head" }));
  const head_box = element("div", { class: "posenc-buttons" });
  head_row.append(head_box);
  const attn_label = element("div", { class: "posenc-frame-label posenc-lab-attn-label" });
  const attn_canvas = element("canvas", { class: "posenc-canvas posenc-lab-attention", role: "img" });
  const views = element("div", { class: "posenc-lab-views" },
    legend, loss_canvas, summary, next,
    element("div", { class: "posenc-controls" }, layer_row, head_row), attn_label, attn_canvas);
  root.append(element("p", { class: "posenc-try", text: "Try a scaling method on RoPE, then a bug; point at the loss chart (or tap it) to see the model's next-byte guesses there." }), controls, status, views);
  el.append(root);

  // ------------------------------------------------------------------ state

  function entry() { return by_name.get(state.values.model); }

  function text_bytes() {
    const v = state.values;
    const longest = entry().runs[change_of(v, entry())]?.max_len ?? entry().longest;
    let bytes;
    if (v.text == null) {
      const e = spec.excerpts[v.excerpt] || "";
      bytes = Uint8Array.from(e, (c) => c.charCodeAt(0) & 255);
    } else bytes = new TextEncoder().encode(v.text);
    return bytes.slice(0, longest);
  }

  // a change the model offers that changes its pass
  const offered = (e, c) => !!e.runs[c] && (c === "none" || !e.runs[c].same);

  // values made consistent with the model: a method, factor or placement it lacks moves
  function settle(v) {
    const e = by_name.get(v.model) || spec.models[0];
    v.model = e.name;
    if (v.bug !== "none" && !e.runs[`bug:${v.bug}`]) v.bug = "none";
    if (v.method !== "none") {
      const values = spec.methods.find((m) => m.key === v.method)?.values || [];
      if (!values.includes(v.factor)) v.factor = values.includes(8) ? 8 : values[values.length - 1];
      if (e.study === "mix") {
        for (const w of [v.where, ...spec.where]) {
          if (offered(e, `${v.method}:${v.factor}:${w}`)) { v.where = w; break; }
        }
      }
      if (!offered(e, change_of({ ...v, bug: "none" }, e))) v.method = "none";
    }
    const n_layers = e.layers.length;
    v.layer = Math.min(Math.max(v.layer | 0, 0), n_layers - 1);
    v.head = Math.min(Math.max(v.head | 0, 0), e.n_heads - 1);
    v.excerpt = Math.min(Math.max(v.excerpt | 0, 0), spec.excerpts.length - 1);
    return v;
  }

  function set(changes, from_kernel = false) {
    const before = state.values;
    state.values = settle({ ...before, ...changes });
    root.posenc.values = state.values;
    if (!from_kernel) {
      model.set("values", { ...state.values });
      model.save_changes();
    }
    show_controls();
    compute();
  }

  function show_controls() {
    const v = state.values;
    const e = entry();
    model_select.value = v.model;
    const bugged = v.bug !== "none";
    for (const [key, b] of method_buttons) {
      const ok = key === "none" || e.study === "lm"
        ? key === "none" || spec.methods.find((m) => m.key === key).values.some((f) => offered(e, `${key}:${f}`))
        : spec.methods.find((m) => m.key === key).values.some((f) => spec.where.some((w) => offered(e, `${key}:${f}:${w}`)));
      b.disabled = bugged || !ok;
      b.setAttribute("aria-pressed", String(v.method === key));
    }
    const method = spec.methods.find((m) => m.key === v.method);
    factor_box.replaceChildren();
    const factors = method ? method.values : spec.methods[0].values;
    for (const f of factors) {
      const label = v.method === "p-rope" ? `p = ${f}` : `×${f}`;
      const b = element("button", { type: "button", class: "posenc-button", "data-value": String(f) }, label);
      b.addEventListener("click", () => set({ factor: f }));
      b.disabled = bugged || !method || !offered(e, change_of({ ...v, factor: f, bug: "none" }, e));
      b.setAttribute("aria-pressed", String(!!method && v.factor === f));
      factor_box.append(b);
    }
    factor_row.classList.toggle("posenc-disabled", bugged || !method);
    where_buttons.forEach((b, w) => {
      b.disabled = bugged || !method || !offered(e, change_of({ ...v, where: w, bug: "none" }, e));
      b.setAttribute("aria-pressed", String(!!method && v.where === w));
    });
    where_buttons.values().next().value.closest(".posenc-control").style.display = e.study === "mix" ? "" : "none";
    bug_select.replaceChildren(element("option", { value: "none" }, "none"));
    const bugs = spec.bugs.filter((b) => e.runs[`bug:${b.key}`]);
    for (const b of bugs) bug_select.append(element("option", { value: b.key, title: b.title }, `${b.label} (ch. ${b.chapter})`));
    bug_select.value = v.bug;
    bug_select.disabled = bugs.length === 0;
    const chosen = spec.bugs.find((b) => b.key === v.bug);
    bug_note.textContent = chosen
      ? `${chosen.title}${chosen.reports.length ? ` (${chosen.reports.join(", ")})` : ""}; it replaces the scaling method.`
      : bugs.length ? "" : "No bug of chapters 8 or 10 runs on this model: they need RoPE, the learned table or a mixed layout.";
    layer_box.replaceChildren();
    e.layers.forEach((layer, i) => {
      const kind = layer[1] ? "local" : layer[2] ? "chunk" : "global";
      const label = e.study === "mix" ? `${i + 1} ${kind}` : String(i + 1);
      const b = element("button", { type: "button", class: "posenc-button", "data-value": String(i) }, label);
      b.addEventListener("click", () => set({ layer: i }));
      b.setAttribute("aria-pressed", String(v.layer === i));
      layer_box.append(b);
    });
    head_box.replaceChildren();
    for (let h = 0; h < e.n_heads; h++) {
      const b = element("button", { type: "button", class: "posenc-button", "data-value": String(h) }, String(h + 1));
      b.addEventListener("click", () => set({ head: h }));
      b.setAttribute("aria-pressed", String(v.head === h));
      head_box.append(b);
    }
    const bytes = text_bytes();
    if (v.text == null) area.value = Array.from(bytes, (b) => String.fromCharCode(b)).join("");
    const longest = e.runs[change_of(v, e)]?.max_len ?? e.longest;
    counter.textContent = `${bytes.length} bytes read (at most ${longest}, 8L)`;
  }

  // ------------------------------------------------------------------ computing

  function ensure(name) {
    if (!state.loaded.has(name)) {
      const e = by_name.get(name);
      const p = (async () => {
        status.textContent = `Loading the weights of ${e.label} (${(e.bytes / 1e6).toFixed(2)} MB)…`;
        const buffer = await fetch_weights(model, base, e);
        const arch = { ...e, layers: expand(e.layers) };
        delete arch.runs;
        await Promise.all(state.engines.map((engine, k) => new Promise((resolve, reject) => {
          state.waiting.set(`${k}|${name}`, { resolve, reject });
          const own = k === state.engines.length - 1 ? buffer : buffer.slice(0);
          engine.post({ kind: "load", name, arch, buffer: own }, [own]);
        })));
      })();
      p.catch(() => state.loaded.delete(name));
      state.loaded.set(name, p);
    }
    return state.loaded.get(name);
  }

  function expand(compact) {
    return compact.map(([r, w, c, t, sk]) => ({
      rope: r < 0 ? null : spec.ropes[r], window: w || null, chunk: c || null,
      temperature: t < 0 ? null : spec.temperatures[t], sinks: !!sk,
    }));
  }

  function request() {
    const v = state.values;
    const e = entry();
    const change = change_of(v, e);
    const run = e.runs[change];
    const ref_key = run.reference;
    const bytes = text_bytes();
    const full = (r) => ({ ...r, layers: expand(r.layers || e.layers) });
    const text_key = Array.from(bytes).join(",");
    return {
      id: ++state.id, name: e.name, key: `${e.name}|${change}|${text_key}`,
      ref_key: `${e.name}|${ref_key}|${text_key}`,
      change, reference: ref_key, tokens: bytes, run: full(run), ref_run: full(e.runs[ref_key]),
      want: { layer: v.layer, head: v.head },
    };
  }

  function fail(message) {
    status.textContent = message;
    console.error(`model lab: ${message}`);
    if (!state.data) reject_ready(new Error(message));
  }

  async function compute() {
    if (!state.engines) return;
    const req = request();
    if (req.tokens.length < 2) {
      status.textContent = "Type at least two bytes.";
      return;
    }
    try {
      await ensure(req.name);
    } catch (err) {
      fail(`The weights could not be loaded: ${err.message}`);
      return;
    }
    if (req.id !== state.id) return;  // a newer request came while the weights loaded
    if (state.pending) { state.next = req; return; }
    start(req);
  }

  // send the passes a request needs (none when both are kept from before), each to its worker
  function start(req) {
    const c = state.kept.change;
    const need_change = !(c && c.key === req.key && c.layer === req.want.layer);
    const need_ref = req.ref_key !== req.key && !(state.kept.ref && state.kept.ref.key === req.ref_key);
    const passes = Number(need_change) + Number(need_ref);
    if (!passes) { finish(req, 0, 0); return; }
    state.pending = { req, waiting: passes, passes, ms: 0 };
    status.textContent = "Computing…";
    const common = { kind: "pass", id: req.id, name: req.name, tokens: req.tokens };
    if (need_change) state.engines[0].post({ ...common, role: "change", run: req.run, layer: req.want.layer });
    if (need_ref) state.engines[state.engines.length - 1].post({ ...common, role: "ref", run: req.ref_run, layer: null });
  }

  function on_message(m, k) {
    if (m.kind === "loaded") {
      state.waiting.get(`${k}|${m.name}`)?.resolve();
      return;
    }
    if (m.kind === "error" && m.id == null) {
      state.waiting.get(`${k}|${m.name}`)?.reject(new Error(m.message));
      return;
    }
    const p = state.pending;
    if (!p || m.id !== p.req.id) return;
    if (m.kind === "error") {
      state.pending = null;
      state.kept = { change: null, ref: null };
      fail(`Error: ${m.message}`);
      return;
    }
    if (m.role === "change") state.kept.change = { key: p.req.key, layer: p.req.want.layer, loss: m.loss, top: m.top, maps: m.maps };
    else state.kept.ref = { key: p.req.ref_key, loss: m.loss, top: m.top };
    p.ms = Math.max(p.ms, m.ms);
    p.waiting -= 1;
    if (p.waiting > 0) return;
    state.pending = null;
    const next = state.next;
    state.next = null;
    if (next) start(next);  // only the newest waiting request runs, and only it is drawn
    else finish(p.req, p.passes, p.ms);
  }

  function finish(req, passes, ms) {
    const c = state.kept.change;
    const r = req.ref_key === req.key ? c : state.kept.ref;
    state.data = {
      change: req.change, reference: req.reference, loss: c.loss, ref_loss: r.loss, top: c.top,
      ref_top: r.top, attention: c.maps[req.want.head], ms, passes, bytes: req.tokens, model: req.name,
      layer: req.want.layer, head: req.want.head,
    };
    root.posenc.data = state.data;
    const said = passes === 0 ? "no pass needed (both kept from before)" : passes === 1 ? "one pass" : "two passes side by side";
    status.textContent = `${by_name.get(req.name).label}, ${req.tokens.length} bytes: ${said}, ${Math.round(ms)} ms in ${state.where}.`;
    resolve_ready(state.data);
    draw();
  }

  // ------------------------------------------------------------------ drawing

  let geometry = null;
  function label_of(change) {
    if (change === "none") return "unmodified";
    if (change === "packed") return "packed correctly";
    const [a, b, c] = change.split(":");
    if (a === "bug") return spec.bugs.find((x) => x.key === b)?.label || b;
    const m = spec.methods.find((x) => x.key === a);
    const f = a === "p-rope" ? `p = ${b}` : `×${b}`;
    return `${m ? m.label : a} ${f}${c ? (c === "global" ? ", global layers" : ", every layer") : ""}`;
  }

  function draw() {
    const d = state.data;
    const width = Math.max(240, Math.min(root.clientWidth || 640, 672));
    if (!d) {  // the frames at their final size until the first result, so the page does not jump
      const ctx = canvas_2d(loss_canvas, width, width < 480 ? 190 : 230);
      ctx.fillStyle = MUTED;
      ctx.fillText("Loss per byte: computing the first pass…", 12, 24);
      canvas_2d(attn_canvas, Math.max(120, Math.min(width, 360)), Math.max(120, Math.min(width, 360)));
      return;
    }
    const s = d.bytes.length;
    const pointer = state.pointer == null ? s - 2 : Math.min(state.pointer, s - 2);  // a position 0 .. s - 2
    geometry = draw_loss(loss_canvas, width, d, pointer, spec.train_len);
    loss_canvas.setAttribute("aria-label", `Loss per byte of ${label_of(d.change)} and ${label_of(d.reference)} over ${s} bytes`);
    const one = d.change === d.reference;
    legend.replaceChildren(
      element("span", { class: "posenc-lab-key", style: `color:${COLORS.change}` }, `━ ${label_of(d.change)}`),
      ...(one ? [] : [element("span", { class: "posenc-lab-key", style: `color:${COLORS.reference}` }, `╍ ${label_of(d.reference)}`)]));
    const L = spec.train_len;
    const fmt = (x) => (Number.isFinite(x) ? x.toFixed(2) : "–");
    const n = s - 1;
    const both = (lo, hi) => one ? fmt(mean(d.loss, lo, hi)) : `${fmt(mean(d.loss, lo, hi))} vs ${fmt(mean(d.ref_loss, lo, hi))}`;
    const inside = `positions 0–${Math.min(L, n) - 1}: ${both(0, L)}`;
    const beyond = n > L ? `; positions ${L}–${n - 1}: ${both(L, n)}` : "";
    summary.textContent = `Mean loss, nats per byte${one ? "" : " (change vs reference)"}, ${inside}${beyond}.`;
    draw_next(pointer);
    draw_attention(attn_canvas, Math.min(width, 360), d.attention, s, pointer);
    attn_label.textContent = `Attention of layer ${d.layer + 1}, head ${d.head + 1} under ${label_of(d.change)}: query (row) → key (column), colour √weight; the line is position ${pointer}.`;
    attn_canvas.setAttribute("aria-label", attn_label.textContent);
  }

  function draw_next(t) {
    const d = state.data;
    const s = d.bytes.length;
    if (t == null || t < 0 || t >= s - 1) { next.replaceChildren(); return; }
    const context = Array.from(d.bytes.slice(Math.max(0, t - 23), t + 1), show_byte).join("");
    const actual = d.bytes[t + 1];
    const column = (title, top, loss, colour) => {
      const list = element("ol", { class: "posenc-lab-top" });
      for (let r = 0; r < 5; r++) {
        const b = top.bytes[t * 5 + r];
        const p = top.probs[t * 5 + r];
        const bar = element("span", { class: "posenc-lab-bar", style: `width:${Math.round(p * 100)}%;background:${colour}` });
        list.append(element("li", { class: b === actual ? "posenc-lab-hit" : "" },
          element("code", {}, show_byte(b)), bar, element("span", { class: "posenc-lab-p" }, p.toFixed(2))));
      }
      return element("div", { class: "posenc-lab-col" },
        element("div", { class: "posenc-lab-col-title", style: `color:${colour}` }, `${title}: loss ${loss.toFixed(2)}`), list);
    };
    next.replaceChildren(
      element("div", { class: "posenc-lab-context" }, `At position ${t}, after “`, element("code", {}, context), "”, the next byte is ",
        element("code", { class: "posenc-lab-actual" }, show_byte(actual)), ". The five likeliest:"),
      element("div", { class: "posenc-lab-cols" },
        column(label_of(d.change), d.top, d.loss[t], COLORS.change),
        ...(d.change === d.reference ? [] : [column(label_of(d.reference), d.ref_top, d.ref_loss[t], COLORS.reference)])));
  }

  const point = (ev) => {
    if (!geometry || !state.data) return;
    const rect = loss_canvas.getBoundingClientRect();
    const t = geometry.t_of(ev.clientX - rect.left);
    state.pointer = Math.min(Math.max(t, 0), state.data.bytes.length - 2);
    draw();
  };
  loss_canvas.addEventListener("pointermove", point);
  loss_canvas.addEventListener("pointerdown", point);
  loss_canvas.addEventListener("keydown", (ev) => {
    if (!state.data) return;
    const last = state.data.bytes.length - 2;
    const now = state.pointer == null ? last : state.pointer;
    const step = ev.shiftKey ? 16 : 1;
    if (ev.key === "ArrowLeft") state.pointer = Math.max(0, now - step);
    else if (ev.key === "ArrowRight") state.pointer = Math.min(last, now + step);
    else return;
    ev.preventDefault();
    draw();
  });

  model.on("change:values", () => set({ ...model.get("values") }, true));
  if (typeof ResizeObserver !== "undefined") {
    let last = 0;
    new ResizeObserver(() => {
      const w = root.clientWidth;
      if (Math.abs(w - last) > 4) { last = w; draw(); }
    }).observe(root);
  }

  state.values = settle(state.values);
  root.posenc.values = state.values;
  show_controls();
  draw();
  // two workers, one per pass of a request; one if a second cannot start
  (async () => {
    const first = await start_engine(engine_source, (m) => on_message(m, 0));
    let engines = [first];
    if (first.where === "a worker") {
      try {
        const second = await start_engine(engine_source, (m) => on_message(m, 1));
        if (second.where === "a worker") engines = [first, second];
      } catch (err) { /* one worker computes both passes */ }
    }
    state.engines = engines;
    state.where = engines.length > 1 ? "two workers" : first.where;
    compute();
  })().catch((err) => fail(`The model could not start: ${err.message}`));
}

export default { render };
