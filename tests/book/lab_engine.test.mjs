// bytelm.js's forward pass against PyTorch's ByteLM, on a fixture from Python.
//
// Run through tests/book/test_lab_engine.py, which writes the lab's spec, the cases (model,
// change, bytes) and PyTorch's logits for each (float32, the change applied through
// posenc_core) and passes the fixture's path in LAB_ENGINE (run alone, this file skips).
// Each case must agree to TOL of its largest logit: max |js - torch| <= TOL * max |torch|.
// The worst ratio per model is written to the fixture's `report` path for the test to print.
//
// Tolerance. bytelm.js computes in float64 from the float32 weights; PyTorch in float32, so
// the logits differ by float32 rounding carried through 2 or 4 layers (about 1e-6 of the
// largest logit here). TOL = 1e-4 is the bound: far below any wrong formula (a
// rotation one position off, a bfloat16 angle, a missing attention factor move logits by
// 1e-2 or more of their scale).

import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath, pathToFileURL } from "node:url";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const MODULE = process.env.BYTELM_JS || path.join(HERE, "../../posenc_core/book/widgets/bytelm.js");
const engine = await import(pathToFileURL(path.resolve(MODULE)).href);
const FIXTURE = process.env.LAB_ENGINE;
const fixture = FIXTURE ? JSON.parse(fs.readFileSync(FIXTURE, "utf8")) : { cases: [] };
const skip = FIXTURE ? false : "no fixture: run tests/book/test_lab_engine.py, which writes it";
const TOL = 1e-4;

function buffer_of(file) {
  const b = fs.readFileSync(file);
  return b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength);
}

test("bytelm.js's logits equal PyTorch's for every model, method and bug", { skip }, () => {
  const spec = fixture.spec;
  const models = new Map();
  const reference = new Float32Array(buffer_of(fixture.reference));
  const worst = {};
  const failures = [];
  let offset = 0;
  for (const c of fixture.cases) {
    const entry = spec.models.find((m) => m.name === c.model);
    if (!models.has(c.model)) {
      const tensors = engine.parse_safetensors(buffer_of(fixture.weights[c.model]));
      models.set(c.model, engine.load_model(engine.model_arch(spec, entry), tensors));
    }
    const run = engine.resolve_run(spec, entry, c.change);
    const { logits } = engine.forward(models.get(c.model), Uint8Array.from(c.tokens), run);
    const n = c.tokens.length * engine.VOCAB;
    let diff = 0;
    let scale = 0;
    for (let i = 0; i < n; i++) {
      const r = reference[offset + i];
      diff = Math.max(diff, Math.abs(logits[i] - r));
      scale = Math.max(scale, Math.abs(r));
    }
    offset += n;
    const ratio = diff / scale;
    if (!(ratio <= TOL)) failures.push(`${c.model} ${c.change} (${c.tokens.length} bytes): ${ratio.toExponential(2)}`);
    const w = worst[c.model];
    if (!w || !(ratio <= w.ratio)) worst[c.model] = { ratio, change: c.change, cases: (w ? w.cases : 0) };
    worst[c.model].cases += 1;
  }
  assert.equal(offset, reference.length, "the reference holds every case's logits");
  if (fixture.report) fs.writeFileSync(fixture.report, JSON.stringify(worst, null, 1));
  assert.deepEqual(failures, [], `cases off by more than ${TOL} of the largest logit`);
});
