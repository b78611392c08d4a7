// A demo page's model session: the backends this browser has, the models the server can run,
// the backend selector, one open at a time (in the browser through model-open.js, or on the
// server, which also takes over when no browser backend answers right), a model freed only
// after the frame in flight on it, and the status line. Each page gives what is its own.
import {NoRightBackend, hasFastBackend, probeBackends, showBackend, urlOverride} from './runtime.js';
import {fetchManifest} from '../contract/manifest.js';
import {openModel} from './model-open.js';
import {describeCheck} from '../contract/answers.js';
import {SERVER, serverModels} from './server-backend.js';

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
//   server       whether the Server backend may run it (default true)
//   options()    openModel's options for this open: parts, create, answer, warm, key (model-open.js);
//                the object also reaches label() and opened()
//   busy()       a frame is in flight on the open model (it is freed only once that is false)
//   stop()       before a reopen: stop starting frames on the old model
//   opened(o, options)  after an open, before any frame: the page's own set-up
//   restart()    after a reopen (not the first open): frames again
//   label(o, options)   the status line's prefix
//   serverNote   what the status line says of the server: ' (frames go as JPEG…)'
export class PageSession {
  constructor(page) {
    this.page = {server: true, options: () => ({}), busy: () => false, label: () => '', serverNote: '', ...page};
    this.panel = new LoadPanel();
    this.modelSelect = $('model-select');
    this.backendSelect = $('backend-select');
    this.probed = [];
    this.serverIds = [];   // model ids of the task the server can run (none when not allowed)
    this.opened = null;    // {manifest, model, backend, ...}; model is null on the server; null while opening
    this.chain = Promise.resolve();
    this.pending = 0;      // opens queued or running
    this.using = 0;        // use() calls running on the open model
    // Settles once start() has tried its first open: use() called earlier waits for it.
    this.started = new Promise((resolve) => { this.startDone = resolve; });
    rememberChoice(this.modelSelect, this.page.task);
  }

  get onServer() {
    return Boolean(this.opened) && this.opened.backend === SERVER;
  }

  // Probe the backends, ask the server for its models, set up the selector, open the first
  // model and reopen whenever the model, backend or `more` selectors change.
  async start(...more) {
    try {
      const [probed, serverIds] = await Promise.all([probeBackends(), this.page.server ? serverModels(this.page.task) : []]);
      Object.assign(this, {probed, serverIds});
      setupBackendSelect(this.backendSelect, probed, serverIds);
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
    const previous = this.modelSelect.value;
    this.modelSelect.value = modelId;
    try {
      await this.queue(async () => {
        await this.open();
        if (this.page.restart) await this.page.restart();
      });
    } catch (err) {
      this.modelSelect.value = previous;
      await this.reopen();
      throw err;
    }
  }

  queue(job) {
    this.pending += 1;
    const run = this.chain.then(job).finally(() => { this.pending -= 1; });
    this.chain = run.catch(() => {});
    return run;
  }

  // fn(opened) on the open model once the first open was tried and no open is queued; the
  // model is not freed while it runs. Throws when the last open failed.
  async use(fn) {
    await this.started;
    while (this.pending) await this.chain;
    if (!this.opened) throw new Error('No model is open (see the status above).');
    const opened = this.opened;
    this.using += 1;
    try {
      return await fn(opened);
    } finally {
      this.using -= 1;
    }
  }

  async open() {
    const {page, panel} = this;
    const old = this.opened;
    // Only a model that was open has frames to stop: a source chosen while the first model
    // loads keeps waiting for it (FrameSource), and runs once it is open.
    if (old && page.stop) page.stop();
    this.opened = null;   // no new frame starts on the old model
    await frameDone(() => page.busy() || this.using > 0);
    if (old && old.model) old.model.dispose();
    if (!this.modelSelect.value) {
      // Nothing installed and none of yours: frames wait until a model is given to the page.
      panel.status('No model yet: give this page your own model (above), or install one.', 'missing');
      return null;
    }
    const options = page.options();
    const {opened, why} = await openForPage(this.modelSelect.value, this.backendSelect, this.probed, this.serverIds,
                                            panel, options);
    if (page.opened) page.opened(opened, options);
    this.opened = opened;
    const label = page.label(opened, options);
    panel.status(opened.backend === SERVER ? `${label}${opened.manifest.title} on the server${page.serverNote}.${why}`
      : `${label}${describeChoice(opened)}`, 'ready');
    return opened;
  }
}

// The model picked last on this task's page is picked again on the next visit, unless the URL
// names one (?model=) or it is no longer installed. Before start(): the first open is that one.
function rememberChoice(select, task) {
  if (!select) return;
  const key = `datarailroad.model.${task}`;
  try {
    const saved = localStorage.getItem(key);
    if (saved && saved !== select.value && !urlOverride('model') && [...select.options].some((o) => o.value === saved)) {
      select.value = saved;
      select.dispatchEvent(new Event('change'));   // the model card follows; start() listens later
    }
  } catch { /* storage refused (private mode): nothing remembered */ }
  select.addEventListener('change', () => {
    try { localStorage.setItem(key, select.value); } catch { /* as above */ }
  });
}

// Resolves once busy() is false.
async function frameDone(busy) {
  while (busy()) await new Promise((resolve) => setTimeout(resolve, 10));
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

// ---- the backend selector and the Server backend ----

const NO_FAST_BACKEND = ' No fast backend works in this browser (no WebGPU, hardware WebGL or WASM), so the server runs it.';
const NO_RIGHT_BACKEND = ' No backend of this browser gave the right answers on this model, so the server runs it.';

// Options that cannot work here are disabled; ?backend= preselects.
function setupBackendSelect(select, probed, serverIds) {
  for (const option of select.options) {
    if (option.value === SERVER) option.disabled = !serverIds.length;
    else if (option.value !== 'auto') option.disabled = !probed.some((p) => p.name === option.value && p.ok);
  }
  const forced = urlOverride('backend');
  if (forced) select.value = forced;
}

// URL > selector > (no fast browser backend and the server has the model: the server).
// -> {override: backend name or null for "fastest", server: bool, why: text}
function chooseOverride(select, modelId, probed, serverIds) {
  const serverCan = serverIds.includes(modelId);
  // ?backend= only preselects (setupBackendSelect): the selector has the last word.
  const choice = select.value !== 'auto' ? select.value : null;
  if (choice === SERVER) return serverCan ? {override: SERVER, server: true, why: ''} : {override: null, server: false, why: ''};
  if (!choice && serverCan && !hasFastBackend(probed)) return {override: SERVER, server: true, why: NO_FAST_BACKEND};
  return {override: choice, server: false, why: ''};
}

// The "opened model" of the server backend: its manifest; the API holds the weights.
async function openOnServer(modelId, select) {
  const manifest = await fetchManifest(modelId);
  select.value = SERVER;
  document.body.dataset.backend = SERVER;
  showBackend(SERVER);
  return {manifest, model: null, backend: SERVER, reason: 'chosen'};
}

// The page's model where the selector, the URL, the answer checks and the timings say: in the
// browser (openModel with `options`) or on the server, which also takes over when every
// browser backend answers wrong. -> {opened, why} (why: a sentence when the page did not choose the server itself)
async function openForPage(modelId, select, probed, serverIds, panel, options) {
  panel.warn(null);
  const {override, server, why} = chooseOverride(select, modelId, probed, serverIds);
  if (server) return {opened: await openOnServer(modelId, select), why};
  try {
    const opened = await openModel(modelId, probed, override, panel, options);
    document.body.dataset.backend = opened.backend;
    return {opened, why: ''};
  } catch (err) {
    if (!(err instanceof NoRightBackend) || !serverIds.includes(modelId)) throw err;
    return {opened: await openOnServer(modelId, select), why: NO_RIGHT_BACKEND};
  }
}
