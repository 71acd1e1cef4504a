// The explorers' formulas (explorer.js, part 1) against posenc_core, on a fixture from Python.
//
// Run through tests/book/test_explorer_formulas.py, which computes the reference values with
// posenc_core in float64 over a sweep of parameters, writes them to a JSON file and passes its
// path in EXPLORER_FORMULAS (run alone, this file skips). EXPLORER_JS=/path/to/explorer.js
// checks another copy of the module. Each case names an export, its arguments and either the
// values posenc_core gives (`want`) or that posenc_core refuses the arguments (`refused`); a
// case outside the explorers' controls where explorer.js is known to differ says how (`gap`).
//
// Tolerance. Both sides compute in float64 with the same formula, but with different libraries
// (V8's Math.pow, Math.sin, Math.log against torch's and glibc's, each within an ulp or two) and
// sometimes in another order (posenc_core rotates q and k apart and takes a dot product where
// explorer.js rotates by the difference of angles). So a value agrees to a few ulps of the
// numbers that went into it, and the allowance is TOL * scale, with scale the size of those
// numbers for each formula:
//   frequencies, wavelengths        |want|          (a power, a quotient: relative error)
//   sin, cos of p * omega_i         1 + |p|         (an angle p * omega with omega <= 1 is
//                                                    known to |p| * eps, and so is its sine)
//   mean_i cos(k omega_i)           1 + |k|
//   decay bound mean_j |S_j|        (d/2)(1 + |m|)  (partial sums of up to d/2 such terms)
//   score grids                     (1 + P) |q|_1 |k|_1, P the largest position on the grid
// TOL = 1e-12 is about 4500 float64 ulps (eps = 2.2e-16): wide for libm differences (each test
// prints its worst case in ulps of the scale: at most 2, and 15 for llama3 at factor 100, whose
// blend weight loses digits to cancellation), and narrow next to any formula error: a float32
// rounding alone is 1e-7, and a wrong exponent, ramp, sign or branch moves values by far more.
// Each of 25 perturbations of a copy of explorer.js (frequencies or a sine in float32, pi to 9
// digits, an exponent d/(d-1), YaRN's floor as round, llama3's weights swapped, S_j summed one
// term late, a column-major raster index, ...) makes this file fail.

import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath, pathToFileURL } from "node:url";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const MODULE = process.env.EXPLORER_JS || path.join(HERE, "../../posenc_core/book/widgets/explorer.js");
const explorer = await import(pathToFileURL(path.resolve(MODULE)).href);
const FIXTURE = process.env.EXPLORER_FORMULAS;
const cases = FIXTURE ? JSON.parse(fs.readFileSync(FIXTURE, "utf8")).cases : [];
const skip = FIXTURE ? false : "no fixture: run tests/book/test_explorer_formulas.py, which writes it";

const EPS = 2 ** -52;
const TOL = 1e-12;

// every export is a formula checked here or is not a formula (checked elsewhere)
const FORMULAS = [
  "sinusoidal_frequencies",
  "sinusoidal_wavelengths",
  "sinusoidal_table",
  "sinusoidal_similarity",
  "shift_matrix_block",
  "rope_frequencies",
  "rope_score_vs_distance",
  "rope_decay_bound",
  "axial_score_grid",
  "raster_score_grid",
  "alibi_slopes",
  "alibi_bias",
  "sinusoidal_encoding",
  "shift_matrix",
  "rope_cos_sin",
  "apply_rope",
];
// parse_number, read_number, check_values, REASONS: explorer_input.test.mjs; default (render):
// the same file in a fake DOM, and tests/built/test_explorers.py in Chromium
const NOT_FORMULAS = ["REASONS", "check_values", "default", "parse_number", "read_number"];

function norm1(v) {
  return v.reduce((s, x) => s + Math.abs(x), 0);
}

// the scale of each value of a case, in the shape of its values (see the table above)
function scales(c) {
  const [a0, a1] = c.args;
  switch (c.fn) {
    case "sinusoidal_frequencies":
    case "sinusoidal_wavelengths":
    case "rope_frequencies":
      return c.want.map(Math.abs);
    case "sinusoidal_table":
      return c.rows.map((p) => Array(a1).fill(1 + p));
    case "shift_matrix_block":
      return [Array(2).fill(1 + Math.abs(a0)), Array(2).fill(1 + Math.abs(a0))];
    case "sinusoidal_similarity":
    case "rope_score_vs_distance":
      return a0.map((k) => 1 + Math.abs(k));
    case "rope_decay_bound":
      return a0.map((m) => (a1 / 2) * (1 + Math.abs(m)));
    case "axial_score_grid":
    case "raster_score_grid": {
      const [n, , , , , q, k] = c.args;
      const last = c.fn === "axial_score_grid" ? n - 1 : n * n - 1; // the largest position
      const s = (1 + last) * norm1(q) * norm1(k);
      return c.want.map((row) => row.map(() => s));
    }
    case "alibi_slopes":
      return c.want.map(Math.abs);
    case "alibi_bias": // -m (i - j) with m <= 1: the size of the distance
      return c.want.map((head) => head.map((row) => row.map(() => 1 + a1 + c.args[2])));
    case "sinusoidal_encoding": // sin, cos of p * omega_i, as a row of the table
      return a0.map((p) => Array(a1).fill(1 + Math.abs(p)));
    case "shift_matrix": // cos, sin of k * omega_i
      return c.want.map((row) => row.map(() => 1 + Math.abs(a0)));
    case "rope_cos_sin": // (cos, sin) of m * theta_i, each row as a row of the table
      return [0, 1].map(() => a0.map((p) => Array(a1).fill(1 + Math.abs(p))));
    case "apply_rope": // x1 cos - x2 sin from exact tables: the size of the entries of x
      return c.want.map(() => norm1(a0));
    default:
      throw new Error(`no scale for ${c.fn}`);
  }
}

// what the export gives for a case, as nested plain arrays
function call(c) {
  const got = explorer[c.fn](...c.args);
  if (c.fn === "sinusoidal_table") return c.rows.map((p) => Array.from(got[p]));
  if (c.fn === "shift_matrix_block") return got.map((row) => Array.from(row));
  if (c.fn === "alibi_bias") return got.map((head) => head.map((row) => Array.from(row)));
  if (c.fn === "rope_cos_sin") return got.map((table) => table.map((row) => Array.from(row)));
  if (Array.isArray(got)) return got.map((row) => Array.from(row)); // the score grids' rows
  return Array.from(got);
}

// a case's arguments as a message shows them, long arrays shortened
const short = (k, v) => (k !== "" && Array.isArray(v) && v.length > 6 ? `[${v.length} values]` : v);
const shown = (args) => JSON.stringify(args, short).slice(1, -1);

// compare nested arrays; returns the worst |got - want| / (eps * scale)
function agree(c, got, want, scale, where = []) {
  if (want === "-inf") {
    // a masked entry (JSON has no infinity; the fixture writes it as text)
    assert.equal(got, -Infinity, `${c.fn}(${shown(c.args)}) at [${where}]: explorer.js ${got}, posenc_core -inf`);
    return 0;
  }
  if (typeof want === "number") {
    const allowed = TOL * scale;
    const error = Math.abs(got - want);
    assert.ok(
      Number.isFinite(got) && error <= allowed,
      `${c.fn}(${shown(c.args)}) at [${where}]: explorer.js ${got}, posenc_core ${want}, ` +
        `differ by ${error}, allowed ${allowed}`,
    );
    return error / (EPS * scale);
  }
  assert.equal(got.length, want.length, `${c.fn}(${shown(c.args)}) at [${where}]: length`);
  let worst = 0;
  for (let i = 0; i < want.length; i++) {
    worst = Math.max(worst, agree(c, got[i], want[i], scale[i], [...where, i]));
  }
  return worst;
}

test("every export is a formula checked here or named as checked elsewhere", () => {
  const names = Object.keys(explorer).sort();
  assert.deepEqual(names, [...FORMULAS, ...NOT_FORMULAS].sort());
});

for (const fn of FORMULAS) {
  test(`${fn} agrees with posenc_core over the sweep`, { skip }, (t) => {
    const values = cases.filter((c) => c.fn === fn && !c.gap);
    assert.ok(values.length > 0, `the fixture has no case for ${fn}`);
    let worst = 0;
    for (const c of values) worst = Math.max(worst, agree(c, call(c), c.want, scales(c)));
    t.diagnostic(`${values.length} cases, worst ${worst.toFixed(1)} ulps of the scale`);
  });
}

// Arguments the explorers' controls never give (each case says which, in `gap`): odd widths,
// yarn's beta_fast 0 and truncate false, llama3 with equal factors exactly at the band's edge,
// ntk at head_dim 2. explorer.js gives posenc_core's values there, or throws where it refuses.
const OUTSIDE = "outside the controls, explorer.js agrees with posenc_core or refuses as it does";
test(OUTSIDE, { skip }, () => {
  const gaps = cases.filter((c) => c.gap);
  assert.ok(gaps.length > 0, "the fixture has no case outside the controls");
  const differ = new Map();
  for (const c of gaps) {
    try {
      if (c.refused) assert.throws(() => explorer[c.fn](...c.args));
      else agree(c, call(c), c.want, scales(c));
    } catch {
      differ.set(c.gap, [...(differ.get(c.gap) ?? []), `${c.fn}(${shown(c.args)})`]);
    }
  }
  const report = [...differ].map(([gap, where]) => `${gap}: ${where.length} cases, e.g. ${where[0]}`);
  assert.deepEqual(report, []);
});

test("rope_frequencies draws each method the scaling explorer offers and refuses the others", { skip }, () => {
  const compared = new Set(
    cases.filter((c) => c.fn === "rope_frequencies" && c.args[2] && !c.gap).map((c) => c.args[2].rope_type),
  );
  const methods = cases.find((c) => c.fn === "explorer_methods").want;
  for (const m of methods) assert.ok(compared.has(m), `the explorer offers ${m}, compared with no case`);
  const scaling = { factor: 2, original_max_position_embeddings: 4096, low_freq_factor: 1, high_freq_factor: 4 };
  for (const { rope_type } of cases.filter((c) => c.fn === "rope_type")) {
    if (compared.has(rope_type)) continue;
    assert.throws(
      () => explorer.rope_frequencies(8, 10000, { ...scaling, rope_type }, null),
      /is not drawn here/,
      `rope_type ${rope_type} of posenc_core: explorer.js neither draws it nor refuses it`,
    );
  }
});
