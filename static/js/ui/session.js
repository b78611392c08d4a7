// A demo page's model session on the page: the backends this browser has, the models the server
// can run, the model and backend selectors (they write the page's state: state.model,
// state.backend; the selectors show it), the status line, and the page's hooks around each
// open. The opening itself, one at a time, is runtime/session.js's. Each page gives what is
// its own.
import {onBackendChange, probeBackends, urlOverride} from '../runtime/runtime.js';
import {ModelSession, openForPage} from '../runtime/session.js';
import {describeCheck} from '../contract/answers.js';
import {SERVER, serverModels, setUploadLimit} from '../runtime/server-backend.js';
import {pageData, showBackend} from './page.js';

const $ = (id) => document.getElementById(id);

// The status panel: one line, a byte-progress bar and the wrong-answers warning.
export class LoadPanel {
  constructor() {
    this.panel = $('model-status');
    this.line = $('status-line');
    this.bar = $('load-progress');
    this.text = $('load-text');
    this.warning = $('answer-warning');
  }

  // A backend's wrong answers, shown until the next open (null hides it).
  warn(text) {
    if (!this.warning) return;
    this.warning.hidden = !text;
    this.warning.textContent = text || '';
  }

  status(text, state) {
    if (this.line) this.line.textContent = text;
    if (state && this.panel) this.panel.dataset.state = state;
  }

  progress(fraction) {
    if (!this.bar) return;
    this.bar.parentElement.hidden = fraction >= 1;
    this.bar.value = fraction;
    this.text.textContent = `${Math.round(fraction * 100)}%`;
  }
}

// What a page gives its session (all but task optional):
//   task         the API's task name in /api/v1/models ('detect', 'classify', 'handpose')
//   state        the page's state object: the session keeps state.model and state.backend in it
//   server       whether the Server backend may run it (default true)
//   options()    openModel's options for this open: parts, create, answer, warm, key (model-open.js);
//                the object also reaches label() and opened()
//   busy()       a frame is in flight on the open model (it is freed only once that is false)
//   stop()       before a reopen: stop starting frames on the old model
//   opened(o, options)  after an open, before any frame: the page's own set-up
//   restart()    after a reopen (not the first open): frames again
//   label(o, options)   the status line's prefix
//   serverNote   what the status line says of the server: ' (frames go as JPEG…)'
export class PageSession extends ModelSession {
  constructor(page) {
    super();
    this.page = {server: true, options: () => ({}), busy: () => false, label: () => '', serverNote: '', ...page};
    this.state = this.page.state || {};
    this.panel = new LoadPanel();
    this.modelSelect = $('model-select');
    this.backendSelect = $('backend-select');
    this.probed = [];
    this.serverIds = [];   // model ids of the task the server can run (none when not allowed)
    setUploadLimit(pageData().max_upload_bytes);
    onBackendChange(showBackend);
    // The selectors write the state from the first moment; start() makes a change reopen.
    this.state.model = this.modelSelect ? this.modelSelect.value : '';
    this.state.backend = this.backendSelect ? this.backendSelect.value : 'auto';
    if (this.modelSelect) this.modelSelect.addEventListener('change', () => { this.state.model = this.modelSelect.value; });
    if (this.backendSelect) this.backendSelect.addEventListener('change', () => { this.state.backend = this.backendSelect.value; });
    rememberChoice(this, this.page.task);
  }

  // The model to open next (one the picker has), shown by the picker.
  pickModel(modelId) {
    this.state.model = modelId;
    this.modelSelect.value = modelId;
  }

  pickBackend(backend) {
    this.state.backend = backend;
    this.backendSelect.value = backend;
  }

  // Probe the backends, ask the server for its models, set up the selector, open the first
  // model and reopen whenever the model, backend or `more` selectors change (each of `more`
  // writes the page's state in a listener of the page's own).
  async start(...more) {
    try {
      const markUnreachable = (why) => {
        const option = document.querySelector(`#backend-select option[value="${SERVER}"]`);
        if (!option) return;
        option.textContent = 'Server (unreachable)';
        option.title = why;
      };
      const [probed, serverIds] = await Promise.all([
        probeBackends(), this.page.server ? serverModels(this.page.task, markUnreachable) : []]);
      Object.assign(this, {probed, serverIds});
      this.setupBackendSelect();
      for (const select of [this.modelSelect, this.backendSelect, ...more]) {
        select.addEventListener('change', () => this.reopen());
      }
      await this.queue(() => this.open());
    } finally {
      this.startDone();
    }
  }

  // One open at a time, behind any still running; a failure is reported on the panel.
  reopen() {
    return this.queue(async () => {
      await this.open();
      if (this.page.restart) await this.page.restart();
    }).catch((err) => this.panel.status(`Could not load: ${err.message}`, 'error'));
  }

  // Opens `modelId` (one the page added to the picker); when it fails, reopens the model
  // that was open and throws, so the caller can say why. Waits for the first open.
  async switchTo(modelId) {
    await this.started;
    const previous = this.state.model;
    this.pickModel(modelId);
    try {
      await this.queue(async () => {
        await this.open();
        if (this.page.restart) await this.page.restart();
      });
    } catch (err) {
      this.pickModel(previous);
      await this.reopen();
      throw err;
    }
  }

  async open() {
    const {page, panel, state} = this;
    await this.release({stop: page.stop && (() => page.stop()), busy: () => page.busy()});
    if (!state.model) {
      // Nothing installed and none of yours: frames wait until a model is given to the page.
      panel.status('No model yet: give this page your own model (above), or install one.', 'missing');
      return null;
    }
    const options = page.options();
    const {opened, why} = await openForPage(state.model, state.backend, this.probed, this.serverIds, panel, options);
    this.showOpened(opened);
    if (page.opened) page.opened(opened, options);
    this.opened = opened;
    const label = page.label(opened, options);
    panel.status(opened.backend === SERVER ? `${label}${opened.manifest.title} on the server${page.serverNote}.${why}`
      : `${label}${describeChoice(opened)}`, 'ready');
    return opened;
  }

  // Where the model runs, on the page: the body's data-backend (and data-answer-check in the
  // browser); on the server, the selector says so (it stays the choice) and so does the badge.
  showOpened(opened) {
    if (opened.backend === SERVER) {
      this.pickBackend(SERVER);
      showBackend(SERVER);
    } else {
      document.body.dataset.answerCheck = opened.check ? (opened.check.ok ? 'passed' : 'failed') : 'none';
    }
    document.body.dataset.backend = opened.backend;
  }

  // Options that cannot work here are disabled; ?backend= preselects.
  setupBackendSelect() {
    const select = this.backendSelect;
    for (const option of select.options) {
      if (option.value === SERVER) option.disabled = !this.serverIds.length;
      else if (option.value !== 'auto') option.disabled = !this.probed.some((p) => p.name === option.value && p.ok);
    }
    const forced = urlOverride('backend');
    // A name the selector lacks selects nothing, as setting the select's value to it does.
    if (forced) this.pickBackend([...select.options].some((o) => o.value === forced) ? forced : '');
  }
}

// The model picked last on this task's page is picked again on the next visit, unless the URL
// names one (?model=) or it is no longer installed. Before start(): the first open is that one.
function rememberChoice(session, task) {
  const select = session.modelSelect;
  if (!select) return;
  const key = `datarailroad.model.${task}`;
  try {
    const saved = localStorage.getItem(key);
    if (saved && saved !== session.state.model && !urlOverride('model') && [...select.options].some((o) => o.value === saved)) {
      session.pickModel(saved);
      select.dispatchEvent(new Event('change'));   // the model card follows; start() listens later
    }
  } catch { /* storage refused (private mode): nothing remembered */ }
  select.addEventListener('change', () => {
    try { localStorage.setItem(key, select.value); } catch { /* as above */ }
  });
}

export function describeChoice(opened) {
  const how = {chosen: 'as chosen', remembered: 'remembered fastest', fastest: 'fastest measured',
               'only one': 'the only fast one here'}[opened.reason] || opened.reason;
  const checks = opened.checks || {};
  const timing = ([k, v]) => {
    if (checks[k] && !checks[k].ok) return `${k} wrong answers`;
    return `${k} ${Number.isFinite(v) ? v.toFixed(0) + ' ms' : 'failed'}`;
  };
  const timed = opened.timings ? ' (' + Object.entries(opened.timings).map(timing).join(', ') + ')' : '';
  const fallback = opened.fallback ? ` ${opened.fallback}` : '';
  const check = opened.check ? `; ${describeCheck(opened.check)}` : '';
  return `${opened.manifest.title || opened.manifest.id} on ${opened.backend}, ${how}${timed}; ` +
    `warm-up ${opened.warmMs.toFixed(0)} ms${check}.${fallback}`;
}
