// The answer check (= modelcontract/answers.py): before a page trusts a backend, it runs the
// model on the synthetic pattern (geometry.js checkPattern; tensor/answers.js makes the
// model's input from it) and compares the answer with what the source framework answered at
// build time (the manifest's answer_check). A backend that is off is not picked, and is
// remembered as such for this build of the model (runtime/answer-records.js).
import {outputTensors} from './manifest.js';
import TWINS from './twins.json' with {type: 'json'};

export const MAX_SAMPLES = TWINS.answers.max_samples;
export const SCALE_FLOOR = TWINS.answers.scale_floor;

// All indices of a small output, else `samples` evenly spaced ones: floor(i * size / samples).
export function sampleIndices(size, samples = MAX_SAMPLES) {
  if (size <= samples) return Array.from({length: size}, (_, i) => i);
  return Array.from({length: samples}, (_, i) => Math.floor((i * size) / samples));
}

// One part's record {role: {size, values}} against {role: TypedArray}: the largest
// |answer - reference| / max(max |reference|, SCALE_FLOOR); Infinity for a missing role,
// another size or a non-finite value.
export function answerError(recorded, outputs) {
  let worst = 0;
  for (const [role, ref] of Object.entries(recorded)) {
    const got = outputs[role];
    if (!got || got.length !== ref.size) return Infinity;
    const indices = sampleIndices(got.length);
    let scale = SCALE_FLOOR;
    for (const v of ref.values) scale = Math.max(scale, Math.abs(v));
    for (let i = 0; i < indices.length; i++) {
      const value = got[indices[i]];
      if (!Number.isFinite(value)) return Infinity;
      worst = Math.max(worst, Math.abs(value - ref.values[i]) / scale);
    }
  }
  return worst;
}

// The roles a one-graph model answers with: its manifest tensors, by key (else name).
export function graphRoles(manifest) {
  return outputTensors(manifest).map((t) => ({role: t.key || t.name, name: t.name}));
}

// The verdict on one answer {part: {role: TypedArray}}: {error, tolerance, ok}, or null when
// the build has no record (built before answer checks: rebuild it to get one).
export function judge(manifest, answer) {
  const check = manifest.answer_check;
  if (!check || !answer) return null;
  let error = 0;
  for (const [part, outputs] of Object.entries(answer)) {
    const recorded = check.parts[part];
    if (recorded) error = Math.max(error, answerError(recorded, outputs));
  }
  return {error, tolerance: check.tolerance, ok: error <= check.tolerance};
}

export function formatError(error) {
  return Number.isFinite(error) ? error.toExponential(1) : 'no answer';
}

export function describeCheck(check) {
  if (!check) return 'not checked (this build has no answer record: rebuild it)';
  const error = formatError(check.error);
  return check.ok ? `answer check passed (error ${error})` : `wrong answers (error ${error} > ${check.tolerance})`;
}
