// The "Your gestures" (/hands) and "Your classes" (/classify) panel: name a class, record
// it (live: one example a frame for RECORD_MS; a still image: one example), see each
// class's examples and live match, remove one, export / import the set as one JSON file.
// The set lives in IndexedDB (store.js). The matching is example_sets.js; this module only
// wires it to the page's custom-* elements. A change is saved before it is shown, so a
// refused one loses nothing.
import {loadValue, saveValue} from '../runtime/store.js';
import {download} from './tracking-panel.js';

export const RECORD_MS = 3000;
const HELD_MS = 400;   // a press longer than this is a hold

export class ExamplesPanel {
  // $: the page's getElementById; sets: an ExampleSets; key: its IndexedDB key; file: the
  // export's file name; isLive(): whether frames come from a live source; onChange():
  // rerun a still image.
  // stillHint: what to say when Record is pressed without a live source (else a still
  // image gives one example).
  constructor($, {sets, key, file, isLive, onChange = () => {}, stillHint = ''}) {
    Object.assign(this, {$, sets, key, file, isLive, onChange, stillHint});
    this.set = sets.empty();
    this.recording = null;   // {name, until, vectors}
    this.votes = {};         // the latest frame's: name -> share of the nearest examples
    // Held: records while held; a click (or the keyboard): RECORD_MS.
    const button = $('custom-record');
    button.addEventListener('pointerdown', () => {
      this.pressedAt = performance.now();
      this.record(Infinity);
    });
    const release = () => {
      if (this.pressedAt == null) return;
      const held = performance.now() - this.pressedAt;
      this.pressedAt = null;
      if (this.recording) this.recording.until = held > HELD_MS ? 0 : performance.now() + RECORD_MS - held;
    };
    button.addEventListener('pointerup', release);
    button.addEventListener('pointerleave', release);
    button.addEventListener('click', (e) => { if (e.detail === 0) this.record(); });
    $('custom-export').addEventListener('click', () => this.exportSet());
    $('custom-import').addEventListener('change', (e) => {
      const file = e.target.files[0];
      e.target.value = '';
      if (file) this.importFile(file);
    });
    $('custom-list').addEventListener('click', (e) => {
      const name = e.target.closest('[data-remove]')?.dataset.remove;
      if (name != null) this.change(this.sets.remove(this.set, name), `Removed "${name}".`);
    });
  }

  async load() {
    try {
      const saved = await loadValue(this.key);
      if (saved) this.set = this.sets.validate(saved);
    } catch (err) {
      this.say(`Your saved ${this.sets.kind.noun}s could not be read (${err.message}); starting with none.`, 'error');
    }
    this.render();
  }

  say(text, kind = 'info') {
    const el = this.$('custom-message');
    el.hidden = !text;
    el.textContent = text || '';
    el.dataset.kind = kind;
  }

  async change(set, message) {
    try {
      await saveValue(this.key, set);
    } catch (err) {
      this.say(`Not saved: ${err.message}`, 'error');
      return false;
    }
    this.set = set;
    this.say(message);
    this.render();
    this.onChange();
    return true;
  }

  record(ms = RECORD_MS) {
    let name;
    try {
      name = this.sets.checkName(this.$('custom-name').value);
    } catch (err) {
      this.say(err.message, 'error');
      return;
    }
    const live = this.isLive();
    if (!live && this.stillHint) {
      this.say(this.stillHint, 'error');
      return;
    }
    this.recording = {name, vectors: [], until: live ? performance.now() + ms : 0};
    this.$('custom-panel').dataset.recording = 'true';
    this.say(live ? `Recording "${name}"…` : `Adding "${name}"…`);
    if (!live) this.onChange();   // a still image: its next run gives the example
  }

  // Each frame's vectors (a hand's, an image's) -> the match of each; a recording takes
  // the first one.
  async update(vectors) {
    if (this.recording) {
      const rec = this.recording;
      if (vectors.length) rec.vectors.push(vectors[0]);
      if (performance.now() >= rec.until) {
        this.recording = null;
        delete this.$('custom-panel').dataset.recording;
        await this.finish(rec);
      }
    }
    const matches = vectors.map((v) => this.match(v));
    this.votes = (matches.find((m) => m) || {votes: {}}).votes;
    this.showVotes();
    return matches;
  }

  // One vector against the set (no recording, no display).
  match(vector) {
    return this.sets.match(vector, this.set);
  }

  // Examples given at once (dropped images): as a recording that just ended.
  async addVectors(name, vectors) {
    let clean;
    try {
      clean = this.sets.checkName(name);
    } catch (err) {
      this.say(err.message, 'error');
      return;
    }
    await this.finish({name: clean, vectors});
  }

  async finish({name, vectors}) {
    let set;
    try {
      set = this.sets.add(this.set, name, vectors);
    } catch (err) {
      this.say(err.message, 'error');
      return;
    }
    const count = set.classes.find((c) => c.name === name).examples.length;
    const few = count < this.sets.kind.limits.warn_below ? ` Only ${count}: record a few more, from other angles, for a steadier match.` : '';
    await this.change(set, `"${name}": ${vectors.length} example(s) added, ${count} in all.${few}`);
  }

  exportSet() {
    if (!this.set.classes.length) {
      this.say(`Nothing to export: record a ${this.sets.kind.noun} first.`, 'error');
      return;
    }
    download(JSON.stringify(this.set), 'application/json', this.file);
  }

  async importFile(file) {
    let set;
    try {
      set = this.sets.parse(await file.text());
    } catch (err) {
      this.say(`${err.message} Your ${this.sets.kind.noun}s are unchanged.`, 'error');
      return;
    }
    const examples = set.classes.reduce((n, c) => n + c.examples.length, 0);
    const noun = this.sets.kind.noun;
    await this.change(set, `Imported ${set.classes.length} ${noun}(s), ${examples} example(s), from ${file.name}.`);
  }

  render() {
    const list = this.$('custom-list');
    list.replaceChildren(...this.set.classes.map((g) => {
      const li = document.createElement('li');
      li.dataset.name = g.name;
      li.dataset.examples = String(g.examples.length);
      const name = document.createElement('span');
      name.className = 'custom-name';
      name.textContent = g.name;
      const count = document.createElement('span');
      count.className = 'custom-count';
      count.textContent = `${g.examples.length} example${g.examples.length === 1 ? '' : 's'}`;
      const bar = document.createElement('span');
      bar.className = 'bar';
      bar.append(document.createElement('span'));
      const remove = document.createElement('button');
      remove.type = 'button';
      remove.dataset.remove = g.name;
      remove.textContent = 'Remove';
      li.append(name, count, bar, remove);
      return li;
    }));
    list.dataset.count = String(this.set.classes.length);
    this.$('custom-export').disabled = !this.set.classes.length;
    this.showVotes();
  }

  showVotes() {
    for (const li of this.$('custom-list').children) {
      const share = this.votes[li.dataset.name] || 0;
      li.dataset.confidence = share.toFixed(2);
      li.querySelector('.bar > span').style.width = `${(share * 100).toFixed(0)}%`;
    }
  }
}
