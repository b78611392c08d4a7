// The answer check (= modelcontract/answers.py): before a page trusts a backend, it runs the
// model on the synthetic pattern (geometry.js checkPattern) and compares the answer with what
// the source framework answered at build time (the manifest's answer_check). A backend that
// is off is not picked, and is remembered as such for this build of the model.
import {checkPattern, prepareInput} from './geometry.js';
import {outputTensors} from './manifest.js';
import TWINS from './twins.json' with {type: 'json'};

const tf = globalThis.tf;

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

function patternTensor(height, width) {
  return tf.tensor3d(Int32Array.from(checkPattern(height, width)), [height, width, 3], 'int32');
}

// The pattern through a one-graph model's input contract -> [1,H,W,3] (the caller disposes it).
export function modelInput(spec) {
  const [, height, width] = spec.shape;
  const pixels = patternTensor(height, width);
  try {
    return prepareInput(pixels, spec).input;
  } finally {
    pixels.dispose();
  }
}

// The pattern at a part's input size, only scaled (hand pose: answers.py part_input).
export function partInput(spec) {
  const [, height, width] = spec.shape;
  return tf.tidy(() => patternTensor(height, width).toFloat().mul(spec.scale ?? 1).expandDims(0));
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

// ---- What each backend answered, per model build (localStorage; the index page reads it) ----

const PREFIX = 'datarailroad.answers.';

// A build is its manifest's creation time: a rebuilt model is checked again.
function buildOf(manifest) {
  return `${manifest.id}@${manifest.created || ''}`;
}

function readAll(key) {
  try {
    return JSON.parse(localStorage.getItem(PREFIX + key) || 'null');
  } catch {
    return null;
  }
}

// {backend: {ok, error, tolerance, ms}} recorded for this build under `key`.
export function recordedChecks(key, manifest) {
  const stored = readAll(key);
  return stored && stored.build === buildOf(manifest) ? stored.backends : {};
}

// entry: {check, ms (a timed warm run), warmMs (the open's first run)}; `used`: the page runs on it.
export function recordCheck(key, manifest, backend, entry, used = false) {
  const stored = readAll(key);
  const same = stored && stored.build === buildOf(manifest);
  const backends = {...(same ? stored.backends : {}), [backend]: {...entry, at: Date.now()}};
  const record = {build: buildOf(manifest), backends, used: used ? backend : (same ? stored.used : null)};
  try {
    localStorage.setItem(PREFIX + key, JSON.stringify(record));
  } catch { /* private mode: check again next time */ }
}

// Backends recorded as wrong for this build: skipped when choosing.
export function wrongBackends(key, manifest) {
  return Object.entries(recordedChecks(key, manifest)).filter(([, e]) => e.check && !e.check.ok).map(([b]) => b);
}

// Every record: [{key, build, backends}] (the index page's table).
export function allRecords() {
  const out = [];
  try {
    for (let i = 0; i < localStorage.length; i++) {
      const name = localStorage.key(i);
      if (!name.startsWith(PREFIX)) continue;
      const stored = readAll(name.slice(PREFIX.length));
      if (stored) out.push({key: name.slice(PREFIX.length), ...stored});
    }
  } catch { /* no storage */ }
  return out.sort((a, b) => a.key.localeCompare(b.key));
}
