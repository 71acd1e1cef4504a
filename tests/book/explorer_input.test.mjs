// What the explorers make of typed values and of values set from a kernel (explorer.js).
//
// Run: node --test tests/book/explorer_input.test.mjs (tests/book/test_explorer_input.py runs
// it under pytest). EXPLORER_JS=/path/to/explorer.js runs it against another copy of the module
// (the version before these checks fails it). Two parts: the pure functions the module exports
// (parse_number, read_number, check_values) against a table of inputs, and the module's own
// render() driven in a small fake DOM (typed field, slider, buttons, a fake model standing for
// the kernel), which needs no export and so also runs against older versions of the module.

import assert from "node:assert/strict";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath, pathToFileURL } from "node:url";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const MODULE = process.env.EXPLORER_JS || path.join(HERE, "../../posenc_core/book/widgets/explorer.js");
const explorer = await import(pathToFileURL(path.resolve(MODULE)).href);
const { parse_number, read_number, check_values } = explorer;
const HINT_MOST = 100; // characters a hint may take, whatever was typed

// ------------------------------------------------------------------------------ the specs
// as explorer.py's Param.spec() writes them (closed_form.py's rope-scaling and unit-circle)

const FACTOR = {
  name: "factor",
  label: "factor",
  kind: "real",
  min: 1,
  max: 32,
  step: 1,
  log: true,
  slider_step: 0.001,
};
const METHODS = ["linear", "ntk", "dynamic", "yarn", "llama3"];
const METHOD = {
  name: "method",
  label: "method",
  kind: "choice",
  options: METHODS.map((m) => ({ value: m, label: m })),
};
const PAIR = { name: "pair", label: "pair i", kind: "int", min: 0, max: 15, step: 1, log: false };
const OFFSET = { name: "offset", label: "offset k", kind: "int", min: 0, max: 100, step: 1, log: false };
const D_MODEL = { name: "d_model", label: "d_model", kind: "int", min: 2, max: 512, step: 2, log: false };

const SCALING = {
  kind: "rope-scaling",
  name: "rope-scaling",
  title: "How each long-context method rescales RoPE's frequencies, head_dim 64",
  params: [FACTOR, METHOD],
  consts: {
    head_dim: 64,
    models: {
      linear: [10000, 4096, {}],
      ntk: [10000, 4096, {}],
      dynamic: [10000, 4096, { original_max_position_embeddings: 4096 }],
      yarn: [10000, 4096, { original_max_position_embeddings: 4096 }],
      llama3: [500000, 8192, { original_max_position_embeddings: 8192, low_freq_factor: 1, high_freq_factor: 4 }],
    },
    args: { head_dim: 64 },
  },
};
const CIRCLE = {
  kind: "unit-circle",
  name: "unit-circle",
  title: "One pair of a 32-dimensional sinusoidal encoding on the unit circle",
  params: [PAIR, OFFSET],
  consts: { d_model: 32, base: 10000, starts: [0, 5], args: { d_model: 32, base: 10000, starts: [0, 5] } },
};

// ------------------------------------------------------------------------------ parse_number

const TOO_LONG = "1".repeat(41);
const HUGE = "x".repeat(100000);
// typed text -> the number read, or the reason class it is refused for
const PARSE = [
  ["5", 5],
  ["  5  ", 5],
  ["-5", -5],
  ["+5", 5],
  ["2.5", 2.5],
  [".5", 0.5],
  ["5.", 5],
  ["1e6", 1e6],
  ["2.5E-3", 0.0025],
  ["-0", 0],
  ["0e-400", 0],
  ["\u22125", -5], // − minus sign
  ["\u20105", -5], // ‐ hyphen
  ["\u20115", -5], // ‑ non-breaking hyphen
  ["\u20125", -5], // ‒ figure dash
  ["\u20135", -5], // – en dash
  ["\uFE635", -5], // ﹣ small hyphen-minus
  ["\uFF0D5", -5], // － fullwidth hyphen-minus
  ["1e\u22123", 0.001],
  ["\uFF11\uFF12\uFF0E\uFF15", 12.5], // １２．５
  ["10,000", 10000],
  ["500,000", 500000],
  ["1,000,000.5", 1000000.5],
  ["-1,000", -1000],
  ["10_000", 10000],
  ["10 000", 10000],
  ["10\u00A0000", 10000], // no-break space
  ["10\u2009000", 10000], // thin space
  ["10\u202F000", 10000], // narrow no-break space
  ["2,5", "decimal-comma"],
  ["1,25", "decimal-comma"],
  ["0,5", "decimal-comma"],
  [",5", "decimal-comma"],
  ["10,00", "decimal-comma"],
  ["1,0000", "decimal-comma"],
  ["1.000,5", "decimal-comma"],
  ["-2,5e3", "decimal-comma"],
  ["1,2,3", "grouping"],
  ["1,000 000", "grouping"],
  ["10,00,000", "grouping"],
  ["1_0", "grouping"],
  ["1 6", "spaces"],
  ["1 2.5", "spaces"],
  ["5 e3", "spaces"],
  ["- 5", "spaces"],
  ["10  000", "spaces"],
  ["0x10", "not-decimal"],
  ["0X10", "not-decimal"],
  ["-0x10", "not-decimal"],
  ["0b100", "not-decimal"],
  ["0o17", "not-decimal"],
  ["Infinity", "not-a-number"],
  ["-Infinity", "not-a-number"],
  ["NaN", "not-a-number"],
  ["abc", "not-a-number"],
  ["5px", "not-a-number"],
  ["5e", "not-a-number"],
  ["e5", "not-a-number"],
  [".", "not-a-number"],
  ["-", "not-a-number"],
  ["1.2.3", "not-a-number"],
  ["1e5.5", "not-a-number"],
  ["1e400", "overflow"],
  ["-1e400", "overflow"],
  ["1e-400", "underflow"],
  ["-1e-400", "underflow"],
  ["", "empty"],
  ["   ", "empty"],
  [TOO_LONG, "too-long"],
  [HUGE, "too-long"],
  [`5${" ".repeat(100)}`, 5],
];

test("parse_number: every typed text is read as meant or refused for a named reason", () => {
  assert.equal(typeof parse_number, "function", "explorer.js exports parse_number");
  for (const [text, want] of PARSE) {
    const got = parse_number(text);
    const shown = JSON.stringify(text.length > 30 ? `${text.slice(0, 30)}…` : text);
    if (typeof want === "number") {
      assert.ok(!got.reason, `${shown}: refused (${got.why}), expected ${want}`);
      assert.ok(Object.is(got.value, want), `${shown}: ${got.value}, expected ${want}`);
    } else {
      assert.equal(got.reason, want, `${shown}: ${JSON.stringify(got)}, expected ${want}`);
      assert.ok(got.why && got.why.length <= 60, `${shown}: why ${JSON.stringify(got.why)}`);
      assert.ok(explorer.REASONS.includes(got.reason), got.reason);
    }
  }
});

test("parse_number: a refusal says why in words", () => {
  assert.match(parse_number("2,5").why, /use a point for decimals/);
  assert.match(parse_number("1 6").why, /one number, no spaces/);
  assert.match(parse_number("0x10").why, /decimal digits only/);
  assert.match(parse_number(HUGE).why, /too long/);
  assert.doesNotMatch(parse_number(HUGE).why, /xxx/);
});

// ------------------------------------------------------------------------------ read_number

// [control, typed text, number or reason, what the message says]
const READ = [
  [FACTOR, "2,5", "decimal-comma", /point/],
  [FACTOR, "2.5", 2.5],
  [FACTOR, "1 6", "spaces"],
  [FACTOR, "0x10", "not-decimal"],
  [FACTOR, "0b100", "not-decimal"],
  [FACTOR, "1e-400", "underflow", /from 1 to 32/],
  [FACTOR, "1e400", "overflow", /out of range.*from 1 to 32/],
  [FACTOR, "\u22125", "range", /out of range.*from 1 to 32/],
  [FACTOR, "10,000", "range", /for decimals use a point/],
  [FACTOR, "33", "range", /enter a number from 1 to 32/],
  [FACTOR, "32", 32],
  [FACTOR, "1e1", 10],
  [FACTOR, "\uFF15.\uFF15", 5.5],
  [OFFSET, "2,5", "decimal-comma"],
  [OFFSET, "1 6", "spaces"],
  [OFFSET, "0x10", "not-decimal"],
  [OFFSET, "1e-400", "underflow", /too close to 0/],
  [OFFSET, "\u22125", "range", /out of range/],
  [OFFSET, "2.5", "whole", /whole/],
  [OFFSET, "1e2", 100],
  [OFFSET, "16", 16],
  [OFFSET, "abc", "not-a-number"],
  [D_MODEL, "3", "step", /multiple of 2/],
  [D_MODEL, "4", 4],
  [D_MODEL, "1,024", "range"],
];

test("read_number: a control's own rules come after the parse", () => {
  assert.equal(typeof read_number, "function", "explorer.js exports read_number");
  for (const [p, text, want, words] of READ) {
    const got = read_number(p, text);
    if (typeof want === "number") {
      assert.ok(!got.reason, `${p.name} ${text}: refused (${got.why})`);
      assert.equal(got.value, want, `${p.name} ${text}`);
    } else {
      assert.equal(got.reason, want, `${p.name} ${text}: ${JSON.stringify(got)}`);
      if (words) assert.match(got.why, words, `${p.name} ${text}`);
    }
  }
});

// ------------------------------------------------------------------------------ check_values

test("check_values: values from the model are checked as typed ones are", () => {
  assert.equal(typeof check_values, "function", "explorer.js exports check_values");
  const good = { factor: 8, method: "linear" };
  const ok = (v) => check_values(SCALING, v, good);
  assert.deepEqual(ok({ factor: 5.5, method: "yarn" }), { values: { factor: 5.5, method: "yarn" }, problems: [] });
  // a name the explorer lacks is ignored, as explorer.py ignores it
  assert.deepEqual(ok({ factor: 5.5, method: "yarn", extra: 1 }).values, { factor: 5.5, method: "yarn" });
  // a real a hair outside its range (a slider's rounding) is clipped, as explorer.py does
  assert.equal(ok({ factor: 32 * (1 + 1e-13), method: "ntk" }).values.factor, 32);
  assert.equal(ok({ factor: 1 - 1e-13, method: "ntk" }).values.factor, 1);
  const refusals = [
    [{ factor: 8, method: "bogus" }, "method", /not one of linear, ntk, dynamic, yarn, llama3/],
    [{ factor: 8, method: null }, "method", /not one of/],
    [{ factor: 8, method: "Linear" }, "method", /not one of/],
    [{ factor: 1e9, method: "yarn" }, "factor", /out of range/],
    [{ factor: 0.5, method: "yarn" }, "factor", /out of range/],
    [{ factor: NaN, method: "yarn" }, "factor", /not a number/],
    [{ factor: Infinity, method: "yarn" }, "factor", /not a number/],
    [{ factor: "8", method: "yarn" }, "factor", /not a number/],
    [{ factor: null, method: "yarn" }, "factor", /not a number/],
    [{ method: "yarn" }, "factor", /no value/],
  ];
  for (const [incoming, name, words] of refusals) {
    const got = check_values(SCALING, incoming, good);
    assert.deepEqual(got.values, good, JSON.stringify(incoming)); // applied whole or not at all
    assert.equal(got.problems.length, 1, JSON.stringify(got.problems));
    assert.equal(got.problems[0].name, name);
    assert.match(got.problems[0].why, words);
  }
  for (const incoming of [null, [8, "linear"], "values", 8, undefined]) {
    const got = check_values(SCALING, incoming, good);
    assert.deepEqual(got.values, good);
    assert.equal(got.problems[0].name, null);
  }
  const ints = [
    [{ pair: 0, offset: 2.5 }, "offset", /whole/],
    [{ pair: 0, offset: -1 }, "offset", /out of range/],
    [{ pair: 16, offset: 3 }, "pair", /out of range/],
  ];
  for (const [incoming, name, words] of ints) {
    const got = check_values(CIRCLE, incoming, { pair: 0, offset: 3 });
    assert.deepEqual(got.values, { pair: 0, offset: 3 });
    assert.equal(got.problems[0].name, name);
    assert.match(got.problems[0].why, words);
  }
  assert.match(check_values({ params: [D_MODEL] }, { d_model: 5 }, { d_model: 4 }).problems[0].why, /multiple of 2/);
});

test("check_values: with no last good state (the first drawing) a bad value gets a fallback", () => {
  const got = check_values(SCALING, { factor: 1e9, method: "bogus" });
  assert.deepEqual(got.values, { factor: 32, method: "linear" });
  assert.equal(got.problems.length, 2);
  assert.deepEqual(check_values(CIRCLE, { pair: NaN, offset: 2.5 }).values, { pair: 0, offset: 2 });
  assert.deepEqual(check_values(CIRCLE, null).values, { pair: 0, offset: 0 });
});

// ------------------------------------------------------------------------------ a fake DOM

class FakeElement {
  constructor(tag) {
    this.tagName = tag.toUpperCase();
    this.children = [];
    this.attrs = new Map();
    this.listeners = {};
    this.style = {};
    this.dataset = {};
    this.className = "";
    this.value = "";
    this.disabled = false;
    this.clientWidth = 672;
    this.width = 300;
    this.height = 150;
    this.text = "";
    this.classList = {
      toggle: (name, on) => {
        const names = new Set(this.className.split(" ").filter(Boolean));
        if (on) names.add(name);
        else names.delete(name);
        this.className = [...names].join(" ");
      },
    };
  }

  setAttribute(k, v) {
    this.attrs.set(k, String(v));
  }

  getAttribute(k) {
    return this.attrs.has(k) ? this.attrs.get(k) : null;
  }

  removeAttribute(k) {
    this.attrs.delete(k);
  }

  append(...nodes) {
    for (const n of nodes) this.children.push(typeof n === "string" ? { text: n, children: [] } : n);
  }

  get textContent() {
    return this.text + this.children.map((c) => (c instanceof FakeElement ? c.textContent : c.text)).join("");
  }

  set textContent(v) {
    this.text = String(v);
    this.children = [];
  }

  addEventListener(type, fn) {
    (this.listeners[type] ||= []).push(fn);
  }

  // runs the listeners as a browser would: what one throws is reported, not raised
  fire(type, props = {}) {
    const event = { type, target: this, preventDefault() {}, ...props };
    for (const fn of this.listeners[type] || []) {
      try {
        fn(event);
      } catch (err) {
        ERRORS.push(err);
      }
    }
  }

  all(pred) {
    const out = [];
    const walk = (n) => {
      for (const c of n.children) {
        if (!(c instanceof FakeElement)) continue;
        if (pred(c)) out.push(c);
        walk(c);
      }
    };
    walk(this);
    return out;
  }

  querySelectorAll(selector) {
    assert.equal(selector, "input, button");
    return this.all((c) => c.tagName === "INPUT" || c.tagName === "BUTTON");
  }

  getContext() {
    const target = {
      canvas: this,
      measureText: (t) => ({ width: 6 * String(t).length }),
      getTransform: () => ({ a: 1 }),
    };
    return new Proxy(target, {
      get: (t, k) => (k in t ? t[k] : () => {}),
      set: (t, k, v) => {
        t[k] = v;
        return true;
      },
    });
  }
}

const ERRORS = [];
globalThis.document = { createElement: (tag) => new FakeElement(tag) };
globalThis.window = { devicePixelRatio: 1 };

// a model as anywidget hands one to render(); set() from the test stands for the kernel
function fake_model(spec, values) {
  const data = { spec, values };
  const handlers = {};
  return {
    get: (k) => data[k],
    set(k, v) {
      if (JSON.stringify(data[k]) === JSON.stringify(v)) return;
      data[k] = v;
      for (const fn of handlers[`change:${k}`] || []) {
        try {
          fn();
        } catch (err) {
          ERRORS.push(err);
        }
      }
    },
    on: (event, fn) => (handlers[event] ||= []).push(fn),
    save_changes() {},
  };
}

function mount(spec, values) {
  ERRORS.length = 0;
  const model = fake_model(spec, values);
  const el = new FakeElement("div");
  try {
    explorer.default.render({ model, el });
  } catch (err) {
    ERRORS.push(err);
  }
  const root = el.children[0];
  const control = (name) => {
    const [node] = root.all((c) => c.getAttribute("data-param") === name);
    const find = (cls) => node.all((c) => c.className.split(" ").includes(cls))[0];
    return {
      node,
      field: find("posenc-value"),
      slider: find("posenc-slider"),
      hint: find("posenc-hint"),
      buttons: node.all((c) => c.tagName === "BUTTON"),
      type(text) {
        this.field.value = text;
        this.field.fire("keydown", { key: "Enter" });
      },
      slide(x) {
        this.slider.value = String(x);
        this.slider.fire("input");
      },
    };
  };
  return { model, root, control, draws: () => root.posenc.draws, values: () => root.posenc.values };
}

// ------------------------------------------------------------------------------ typed values

// [explorer, control, typed, accepted value or null (refused), what the hint says]; the
// factor starts at 8, the offset at 3
const TYPED = [
  [SCALING, "factor", "2,5", null, /point for decimals/],
  [SCALING, "factor", "1 6", null, /no spaces/],
  [SCALING, "factor", "0x10", null, /decimal digits only/],
  [SCALING, "factor", "0b100", null, /decimal digits only/],
  [SCALING, "factor", "1e-400", null, /too close to 0/],
  [SCALING, "factor", HUGE, null, /too long/],
  [SCALING, "factor", "\u22125", null, /out of range/],
  [SCALING, "factor", "10,000", null, /out of range.*for decimals use a point/],
  [SCALING, "factor", "5.5", 5.5, null],
  [SCALING, "factor", "\u00A05.5\u00A0", 5.5, null],
  [CIRCLE, "offset", "2,5", null, /point for decimals/],
  [CIRCLE, "offset", "1 6", null, /no spaces/],
  [CIRCLE, "offset", "0x10", null, /decimal digits only/],
  [CIRCLE, "offset", "0b100", null, /decimal digits only/],
  [CIRCLE, "offset", "1e-400", null, /too close to 0/],
  [CIRCLE, "offset", HUGE, null, /too long/],
  [CIRCLE, "offset", "\u22125", null, /out of range/],
  [CIRCLE, "offset", "10,0", null, /point for decimals/],
  [CIRCLE, "offset", "1e1", 10, null],
  [CIRCLE, "offset", "\uFF11\uFF16", 16, null],
];
const START = { "rope-scaling": { factor: 8, method: "linear" }, "unit-circle": { pair: 0, offset: 3 } };

test("typed into a number's field: read as meant or refused with a short reason", () => {
  const wrong = []; // every input that goes wrong, not only the first
  for (const [spec, name, text, want, words] of TYPED) {
    const start = START[spec.kind];
    const ex = mount(spec, start);
    const ctl = ex.control(name);
    ctl.type(text);
    const shown = `${spec.kind} ${name} ${JSON.stringify(text.length > 20 ? `${text.slice(0, 20)}…` : text)}`;
    const hint = ctl.hint.textContent;
    const say = (what) => wrong.push(`${shown}: ${what}`);
    if (ERRORS.length) say(`threw ${ERRORS[0]}`);
    if (hint.length > HINT_MOST) say(`a hint of ${hint.length} characters`);
    const v = ex.values()[name];
    if (want === null) {
      if (v !== start[name]) say(`taken as ${v}`);
      if (ctl.field.getAttribute("aria-invalid") !== "true") say("not marked aria-invalid");
      if (!words.test(hint)) say(`hint ${JSON.stringify(hint.slice(0, 120))} does not match ${words}`);
      else if (!hint.endsWith(`kept ${start[name]}`)) say(`hint ${JSON.stringify(hint)} does not say what was kept`);
      if (ctl.field.value !== String(start[name])) say(`the field shows ${ctl.field.value}`);
    } else {
      if (v !== want) say(`${v}, expected ${want}${hint ? ` (${hint.slice(0, 80)})` : ""}`);
      if (hint !== "" || ctl.field.getAttribute("aria-invalid") !== null) say(`a warning: ${hint}`);
    }
  }
  assert.deepEqual(wrong, []);
});

test("after a refused value, the slider (or a typed value) clears the message", () => {
  const ex = mount(CIRCLE, { pair: 0, offset: 3 });
  const ctl = ex.control("offset");
  ctl.type("1000");
  assert.match(ctl.hint.textContent, /out of range.*kept 3/);
  ctl.slide(79);
  assert.equal(ex.values().offset, 79);
  assert.equal(ctl.hint.textContent, "", "the warning stays beside the slider's value");
  assert.equal(ctl.field.getAttribute("aria-invalid"), null);
  assert.equal(ctl.field.value, "79");
  // the keyboard on a log slider, too
  const sc = mount(SCALING, { factor: 8, method: "linear" });
  const factor = sc.control("factor");
  factor.type("2,5");
  assert.notEqual(factor.hint.textContent, "");
  factor.slider.fire("keydown", { key: "ArrowRight" });
  assert.ok(sc.values().factor > 8);
  assert.equal(factor.hint.textContent, "");
  assert.equal(factor.field.value, String(Number(sc.values().factor.toPrecision(6))));
  assert.deepEqual(ERRORS, []);
});

// ------------------------------------------------------------------------------ from a kernel

test("a kernel's unknown method is refused with its reason and the explorer keeps drawing", () => {
  const ex = mount(SCALING, { factor: 8, method: "yarn" });
  const method = ex.control("method");
  const before = ex.draws();
  ex.model.set("values", { factor: 8, method: "bogus" });
  assert.deepEqual(ERRORS, [], "the change handler threw");
  assert.deepEqual(ex.values(), { factor: 8, method: "yarn" });
  assert.match(method.hint.textContent, /"bogus": not one of linear, ntk, dynamic, yarn, llama3; kept yarn/);
  assert.ok(method.hint.textContent.length <= HINT_MOST);
  // the reader's controls still draw
  ex.control("factor").slide(Math.log10(4));
  assert.deepEqual(ERRORS, [], "moving the slider after the kernel's value threw");
  assert.ok(ex.draws() > before, "no redraw after the kernel's value");
  assert.equal(ex.values().method, "yarn");
  assert.ok(Math.abs(ex.values().factor - 4) < 1e-9);
  // a button press clears the method's message; so does a valid value from the kernel
  method.buttons[1].fire("click");
  assert.equal(ex.values().method, "ntk");
  assert.equal(method.hint.textContent, "");
  ex.model.set("values", { factor: 8, method: "bogus" });
  assert.notEqual(method.hint.textContent, "");
  const drawn = ex.draws();
  ex.model.set("values", { factor: 5.5, method: "llama3" });
  assert.deepEqual(ex.values(), { factor: 5.5, method: "llama3" });
  assert.equal(method.hint.textContent, "");
  assert.ok(ex.draws() > drawn);
  assert.deepEqual(ERRORS, []);
});

test("a kernel's number out of range, NaN, or not whole keeps the last good state", () => {
  const ex = mount(SCALING, { factor: 8, method: "linear" });
  for (const factor of [1e9, NaN, "8", -1]) {
    ex.model.set("values", { factor, method: "linear" });
    assert.deepEqual(ex.values(), { factor: 8, method: "linear" }, String(factor));
    assert.match(ex.control("factor").hint.textContent, /kept 8$/);
    assert.equal(ex.control("factor").field.value, "8");
  }
  const circle = mount(CIRCLE, { pair: 0, offset: 3 });
  circle.model.set("values", { pair: 0, offset: 2.5 });
  assert.deepEqual(circle.values(), { pair: 0, offset: 3 });
  assert.match(circle.control("offset").hint.textContent, /whole/);
  circle.model.set("values", null);
  assert.deepEqual(circle.values(), { pair: 0, offset: 3 });
  circle.control("offset").slide(50);
  assert.equal(circle.values().offset, 50);
  assert.equal(circle.control("offset").hint.textContent, "");
  assert.deepEqual(ERRORS, []);
});

test("saved values that are bad draw with a fallback and say so", () => {
  const ex = mount(SCALING, { factor: 8, method: "bogus" });
  assert.deepEqual(ERRORS, [], "render threw");
  assert.deepEqual(ex.values(), { factor: 8, method: "linear" });
  assert.match(ex.control("method").hint.textContent, /not one of/);
});

test("every refusal's message fits in 100 characters, on the widest range", () => {
  // a factor from 10 to 10^7 standing for the base (the widest range of any explorer)
  const wide = { ...SCALING, params: [{ ...FACTOR, min: 10, max: 1e7 }, METHOD] };
  const texts = [...PARSE.map(([t]) => t), ...READ.map(([, t]) => t), "1,500", "99,999,999", "0,0000001"];
  const ex = mount(wide, { factor: 1234567.89, method: "linear" });
  const ctl = ex.control("factor");
  for (const text of texts) {
    ctl.type(text);
    const hint = ctl.hint.textContent;
    assert.ok(hint.length <= HINT_MOST, `${JSON.stringify(text.slice(0, 20))}: ${hint.length}: ${hint}`);
    if (ctl.field.getAttribute("aria-invalid") === "true") assert.match(hint, /; kept \S+$/, text);
    ctl.type("1234567.89");
  }
  assert.deepEqual(ERRORS, []);
});

test("a drawing that throws goes back to the last values drawn and keeps drawing", () => {
  // constants without the yarn model: the values are valid, the drawing fails
  const models = { ...SCALING.consts.models };
  delete models.yarn;
  const broken = { ...SCALING, consts: { ...SCALING.consts, models } };
  const ex = mount(broken, { factor: 8, method: "linear" });
  const method = ex.control("method");
  method.buttons[METHODS.indexOf("yarn")].fire("click");
  assert.deepEqual(ERRORS, []);
  assert.deepEqual(ex.values(), { factor: 8, method: "linear" });
  assert.equal(method.buttons[0].getAttribute("aria-pressed"), "true");
  const notice = ex.root.all((c) => c.className.includes("posenc-notice"))[0];
  assert.match(notice.textContent, /could not draw/);
  assert.ok(notice.textContent.length <= HINT_MOST);
  const drawn = ex.draws();
  ex.control("factor").slide(Math.log10(2));
  assert.ok(ex.draws() > drawn);
  assert.equal(ex.values().factor, 2);
  assert.equal(notice.textContent, "");
  assert.deepEqual(ERRORS, []);
});
