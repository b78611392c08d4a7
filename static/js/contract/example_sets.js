// A set of named classes, each a list of recorded example vectors, matched by k nearest
// neighbours, and the JSON file it is kept in: what "your gestures" (/hands) and "your
// classes" (/classify) share. Pure functions, no DOM; modelcontract/example_sets.py is the
// Python twin the API reads the same files with.
//
// kind: {format, size (numbers a vector), limits: {classes, examples, name, warn_below},
// distance(a, b), max_distance (farther examples do not vote), k, decimals (kept in the file),
// noun ('gesture' | 'class')}: twins.json's example_sets kinds with their distance.
export class ExampleSets {
  constructor(kind) {
    this.kind = kind;
  }

  empty() {
    return {format: this.kind.format, version: 1, classes: []};
  }

  checkName(name) {
    const {limits, noun} = this.kind;
    const clean = String(name == null ? '' : name).trim();
    if (!clean) throw new Error(`Give the ${noun} a name first.`);
    if (clean.length > limits.name) throw new Error(`A name has at most ${limits.name} characters.`);
    return clean;
  }

  // A new set with `vectors` added to the class `name` (made if new); the set given is
  // never changed, so a refused addition loses nothing.
  add(set, name, vectors) {
    const {limits, noun, decimals} = this.kind;
    const clean = this.checkName(name);
    if (!vectors.length) throw new Error(`Nothing was seen while recording: no example was added.`);
    const classes = set.classes.map((c) => ({name: c.name, examples: c.examples.slice()}));
    let entry = classes.find((c) => c.name === clean);
    if (!entry) {
      if (classes.length >= limits.classes) throw new Error(`At most ${limits.classes} ${noun}s: remove one first.`);
      entry = {name: clean, examples: []};
      classes.push(entry);
    }
    const room = limits.examples - entry.examples.length;
    if (room <= 0) throw new Error(`"${clean}" already has ${limits.examples} examples, the most a ${noun} keeps.`);
    // A few decimals keep the file small and change no match.
    const scale = 10 ** decimals;
    entry.examples.push(...vectors.slice(0, room).map((v) => Array.from(v, (x) => Math.round(x * scale) / scale)));
    return {format: this.kind.format, version: 1, classes};
  }

  remove(set, name) {
    return {format: this.kind.format, version: 1, classes: set.classes.filter((c) => c.name !== name)};
  }

  // vector, set -> {name, distance (its nearest example's), confidence, votes: {name: share
  // of the k nearest}}, or null when no example is within maxDistance (or the set is empty).
  match(vector, set) {
    const {distance, max_distance: maxDistance, k: most} = this.kind;
    const near = [];
    set.classes.forEach((c, order) => {
      for (const e of c.examples) {
        const d = distance(vector, e);
        if (d <= maxDistance) near.push({name: c.name, order, d});
      }
    });
    if (!near.length) return null;
    near.sort((a, b) => a.d - b.d || a.order - b.order);
    const k = Math.min(most, near.length);
    const tally = new Map();   // name -> {votes, nearest}
    for (const {name, d} of near.slice(0, k)) {
      const t = tally.get(name) || {votes: 0, nearest: d};
      t.votes += 1;
      tally.set(name, t);
    }
    let best = null;
    for (const [name, t] of tally) {
      if (!best || t.votes > best.votes || (t.votes === best.votes && t.nearest < best.nearest)) best = {name, ...t};
    }
    const votes = Object.fromEntries([...tally].map(([name, t]) => [name, t.votes / k]));
    return {name: best.name, distance: best.nearest, confidence: best.votes / k, votes};
  }

  // Parsed JSON -> the set, or an Error saying what is wrong (the same checks as the
  // server's JSON Schema).
  validate(data) {
    const {format, size, limits, noun} = this.kind;
    const fail = (why) => { throw new Error(`Not a ${noun} file: ${why}.`); };
    if (!data || typeof data !== 'object' || Array.isArray(data)) fail('not a JSON object');
    if (data.format !== format) fail(`"format" is not "${format}"`);
    if (data.version !== 1) fail(`version ${JSON.stringify(data.version)} is not 1`);
    if (!Array.isArray(data.classes)) fail('"classes" is not a list');
    if (data.classes.length > limits.classes) fail(`${data.classes.length} ${noun}s, more than ${limits.classes}`);
    const names = new Set();
    for (const [i, c] of data.classes.entries()) {
      if (!c || typeof c !== 'object' || typeof c.name !== 'string') fail(`${noun} ${i + 1} has no name`);
      const name = c.name.trim();
      if (!name || name !== c.name || name.length > limits.name) fail(`${noun} ${i + 1}'s name is empty, padded or over ${limits.name} characters`);
      if (names.has(name)) fail(`"${name}" appears twice`);
      names.add(name);
      if (!Array.isArray(c.examples) || !c.examples.length) fail(`"${name}" has no examples`);
      if (c.examples.length > limits.examples) fail(`"${name}" has ${c.examples.length} examples, more than ${limits.examples}`);
      for (const e of c.examples) {
        if (!Array.isArray(e) || e.length !== size || !e.every((v) => typeof v === 'number' && Number.isFinite(v))) {
          fail(`an example of "${name}" is not ${size} finite numbers`);
        }
      }
    }
    return {format, version: 1, classes: data.classes.map((c) => ({name: c.name, examples: c.examples}))};
  }

  // Text of a file -> the set (throws with a message for the user).
  parse(text) {
    let data;
    try {
      data = JSON.parse(text);
    } catch {
      throw new Error(`Not a ${this.kind.noun} file: it is not JSON.`);
    }
    return this.validate(data);
  }
}
