// "Your model": a .tflite exported by Ultralytics (on LiteRT.js) or its TF.js folder (on
// TF.js), dropped on the model panel (or where the page takes images) or picked, runs in this
// browser. It is kept for the next visit (IndexedDB), listed in the model picker with a card
// from its own metadata, and can be removed. A file the page cannot run gets one message and
// the page keeps its model.
import {addModel, keptModels, removeModel} from '../runtime/user-models.js';
import {acceptFiles} from './inputs.js';
import {addCard, refreshCard} from './modelcard.js';

const GROUP = 'Your models';

export function isYours(id) {
  return String(id).startsWith('yours-');
}

// The card modelcard.js renders for a model the visitor gave.
function cardOf(manifest) {
  const [, height, width] = manifest.input.shape;
  return {id: manifest.id, title: manifest.title, task: manifest.ultralytics_task, input: {width, height},
          labels: manifest.labels, kpt_shape: manifest.kpt_shape || null, user: manifest.user,
          answer_reference: manifest.answer_reference};
}

export class ModelDrop {
  // session: the page's PageSession; pageTask: 'detect' or 'classify'.
  constructor(session, pageTask, $) {
    Object.assign(this, {session, pageTask, $});
    this.select = $('model-select');
    this.line = $('model-message');
    this.removeButton = $('remove-model');
  }

  // Before the session starts: kept models join the picker (so ?model= may name one).
  async start() {
    const {$} = this;
    for (const {manifest} of await keptModels(this.pageTask)) this.addOption(manifest);
    const wanted = new URLSearchParams(location.search).get('model');
    if (wanted && isYours(wanted) && this.option(wanted)) this.session.pickModel(wanted);
    $('model-file').addEventListener('change', (e) => {
      const files = Array.from(e.target.files);
      e.target.value = '';   // the same files picked again are a change too
      if (files.length) this.give(files);
    });
    acceptFiles($('model-status'), (files) => this.give(files), {paste: false});
    this.removeButton.addEventListener('click', () => this.remove());
    this.select.addEventListener('change', () => this.showRemove());
    this.showRemove();
    refreshCard();
  }

  option(id) {
    return Array.from(this.select.options).find((o) => o.value === id) || null;
  }

  addOption(manifest) {
    let group = Array.from(this.select.children).find((c) => c.label === GROUP);
    if (!group) {
      group = Object.assign(document.createElement('optgroup'), {label: GROUP});
      this.select.append(group);
    }
    if (!this.option(manifest.id)) {
      group.append(new Option(`${manifest.title} · ${(manifest.user.bytes / 1048576).toFixed(1)} MB`, manifest.id));
    }
    addCard(manifest.id, cardOf(manifest));
  }

  dropOption(id) {
    const option = this.option(id);
    if (!option) return;
    const group = option.parentElement;
    option.remove();
    if (group.tagName === 'OPTGROUP' && !group.children.length) group.remove();
  }

  say(text, state = 'info') {
    this.line.hidden = !text;
    this.line.textContent = text || '';
    this.line.dataset.state = state;
  }

  showRemove() {
    this.removeButton.hidden = !isYours(this.session.state.model);
  }

  // Files the visitor gave at once: read, kept, then opened; on any failure the page keeps its model.
  async give(files) {
    const previous = this.session.state.model;
    const what = files.length === 1 ? files[0].name : 'the model';
    this.say(`Reading ${what}…`);
    let added;
    try {
      added = await addModel(files, this.pageTask);
    } catch (err) {
      this.say(err.message, 'error');
      return;
    }
    const {manifest, kept} = added;
    const known = Boolean(this.option(manifest.id));
    this.addOption(manifest);
    this.say(`Opening ${what}…`);
    try {
      await this.session.switchTo(manifest.id);
    } catch (err) {
      if (!known) {
        this.dropOption(manifest.id);
        await removeModel(manifest.id);
      }
      this.showRemove();
      refreshCard();
      const kept = previous ? `the page keeps ${this.optionText(previous)}` : 'the page has no model yet';
      this.say(`${what} could not run in this browser (${err.message}); ${kept}.`, 'error');
      return;
    }
    this.showRemove();
    refreshCard();
    this.say(kept ? `${what} runs in this browser and is kept here for your next visit (Remove takes it away). Nothing was uploaded.`
      : `${what} runs for this visit only: the browser refused to keep it (storage full or private mode).`, 'ok');
  }

  optionText(id) {
    const option = this.option(id);
    return option ? option.textContent.split(' · ')[0] : 'its model';
  }

  async remove() {
    const id = this.session.state.model;
    if (!isYours(id)) return;
    const name = this.optionText(id);
    await removeModel(id);
    this.dropOption(id);
    this.session.pickModel(this.select.value);   // the picker's next model, or none
    this.showRemove();
    refreshCard();
    this.say(`${name} was removed from this browser.`);
    await this.session.reopen();
  }
}
