// /hands' "Your gestures" panel: name a gesture, record it (live: the first hand of every
// frame for RECORD_MS; a still image: its first hand once), see each gesture's examples and
// live match, remove one, export / import the set as one JSON file. The set lives in
// IndexedDB (store.js). The matching itself is custom-gestures.js; this module only wires
// it to the page. A change is saved before it is shown, so a refused one loses nothing.
import {LIMITS, addExamples, emptySet, matchHand, normaliseHand, parseSet, removeGesture,
  checkName} from './custom-gestures.js';
import {loadValue, saveValue} from './store.js';
import {download} from './tracking-panel.js';

export const RECORD_MS = 3000;
const KEY = 'hand-gestures';

export class GesturePanel {
  // $: the page's getElementById; isLive(): whether frames come from a live source;
  // onChange(): rerun a still image.
  constructor($, {isLive, onChange = () => {}}) {
    Object.assign(this, {$, isLive, onChange});
    this.set = emptySet();
    this.recording = null;   // {name, until, vectors}
    this.votes = {};         // the latest frame's: name -> share of the nearest examples
    $('custom-record').addEventListener('click', () => this.record());
    $('custom-export').addEventListener('click', () => this.exportSet());
    $('custom-import').addEventListener('change', (e) => {
      const file = e.target.files[0];
      e.target.value = '';
      if (file) this.importFile(file);
    });
    $('custom-list').addEventListener('click', (e) => {
      const name = e.target.closest('[data-remove]')?.dataset.remove;
      if (name != null) this.change(removeGesture(this.set, name), `Removed "${name}".`);
    });
  }

  async load() {
    try {
      const saved = await loadValue(KEY);
      if (saved) this.set = parseSet(JSON.stringify(saved));
    } catch (err) {
      this.say(`Your saved gestures could not be read (${err.message}); starting with none.`, 'error');
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
      await saveValue(KEY, set);
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

  record() {
    let name;
    try {
      name = checkName(this.$('custom-name').value);
    } catch (err) {
      this.say(err.message, 'error');
      return;
    }
    const live = this.isLive();
    this.recording = {name, vectors: [], until: live ? performance.now() + RECORD_MS : 0};
    this.$('custom-panel').dataset.recording = 'true';
    this.say(live ? `Recording "${name}" for ${RECORD_MS / 1000} s: hold the gesture…` : `Adding "${name}"…`);
    if (!live) this.onChange();   // a still image: its next run gives the example
  }

  // Each frame's hands (the page's result hands, person's handedness) -> custom match each;
  // a recording takes the first hand's vector.
  async update(hands) {
    const vectors = hands.map((h) => normaliseHand(h.keypoints, h.handedness));
    if (this.recording) {
      const rec = this.recording;
      if (vectors.length) rec.vectors.push(vectors[0]);
      if (performance.now() >= rec.until) {
        this.recording = null;
        delete this.$('custom-panel').dataset.recording;
        await this.finish(rec);
      }
    }
    const matches = vectors.map((v) => matchHand(v, this.set));
    this.votes = (matches.find((m) => m) || {votes: {}}).votes;
    this.showVotes();
    return matches;
  }

  async finish({name, vectors}) {
    let set;
    try {
      set = addExamples(this.set, name, vectors);
    } catch (err) {
      this.say(err.message, 'error');
      return;
    }
    const count = set.gestures.find((g) => g.name === name).examples.length;
    const few = count < LIMITS.warnBelow ? ` Only ${count}: record a few more, from other angles, for a steadier match.` : '';
    await this.change(set, `"${name}": ${vectors.length} example(s) added, ${count} in all.${few}`);
  }

  exportSet() {
    if (!this.set.gestures.length) {
      this.say('Nothing to export: record a gesture first.', 'error');
      return;
    }
    download(JSON.stringify(this.set), 'application/json', 'gestures.json');
  }

  async importFile(file) {
    let set;
    try {
      set = parseSet(await file.text());
    } catch (err) {
      this.say(`${err.message} Your gestures are unchanged.`, 'error');
      return;
    }
    const examples = set.gestures.reduce((n, g) => n + g.examples.length, 0);
    await this.change(set, `Imported ${set.gestures.length} gesture(s), ${examples} example(s), from ${file.name}.`);
  }

  render() {
    const list = this.$('custom-list');
    list.replaceChildren(...this.set.gestures.map((g) => {
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
    list.dataset.count = String(this.set.gestures.length);
    this.$('custom-export').disabled = !this.set.gestures.length;
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
