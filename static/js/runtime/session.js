// A page's model session, without its controls: one open at a time (each behind any still
// running), a model freed only after the frame in flight on it, and where a model opens: in
// the browser (model-open.js) or on the server, which also takes over when no browser backend
// is fast or answers right. ui/session.js PageSession wires it to the page's selectors, state
// and status panel.
import {NoRightBackend, hasFastBackend} from './runtime.js';
import {fetchManifest} from './manifests.js';
import {openModel} from './model-open.js';
import {SERVER} from './server-backend.js';

export class ModelSession {
  constructor() {
    this.opened = null;    // {manifest, model, backend, ...}; model is null on the server; null while opening
    this.chain = Promise.resolve();
    this.pending = 0;      // opens queued or running
    this.using = 0;        // use() calls running on the open model
    // Settles once the first open was tried (startDone()): use() called earlier waits for it.
    this.started = new Promise((resolve) => { this.startDone = resolve; });
  }

  get onServer() {
    return Boolean(this.opened) && this.opened.backend === SERVER;
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

  // Before an open: stop() stops starting frames on the open model, which is freed once
  // busy() (a frame in flight) is false and no use() runs on it.
  async release({stop, busy}) {
    const old = this.opened;
    // Only a model that was open has frames to stop: a source chosen while the first model
    // loads keeps waiting for it, and runs once it is open.
    if (old && stop) stop();
    this.opened = null;   // no new frame starts on the old model
    await frameDone(() => busy() || this.using > 0);
    if (old && old.model) old.model.dispose();
  }
}

// Resolves once busy() is false.
async function frameDone(busy) {
  while (busy()) await new Promise((resolve) => setTimeout(resolve, 10));
}

const NO_FAST_BACKEND = ' No fast backend works in this browser (no WebGPU, hardware WebGL or WASM), so the server runs it.';
const NO_RIGHT_BACKEND = ' No backend of this browser gave the right answers on this model, so the server runs it.';

// The backend choice ('auto', a backend, or SERVER) > (no fast browser backend and the server
// has the model: the server). -> {override: backend name or null for "fastest", server: bool, why: text}
function chooseOverride(choice, modelId, probed, serverIds) {
  const serverCan = serverIds.includes(modelId);
  // ?backend= only preselects (ui/session.js): the selector has the last word.
  choice = choice !== 'auto' ? choice : null;
  if (choice === SERVER) return serverCan ? {override: SERVER, server: true, why: ''} : {override: null, server: false, why: ''};
  if (!choice && serverCan && !hasFastBackend(probed)) return {override: SERVER, server: true, why: NO_FAST_BACKEND};
  return {override: choice, server: false, why: ''};
}

// The "opened model" of the server backend: its manifest; the API holds the weights.
async function openOnServer(modelId) {
  const manifest = await fetchManifest(modelId);
  return {manifest, model: null, backend: SERVER, reason: 'chosen'};
}

// The page's model where the backend choice, the answer checks and the timings say: in the
// browser (openModel with `options`, `panel` its status panel) or on the server, which also
// takes over when every browser backend answers wrong. -> {opened, why} (why: a sentence when
// the page did not choose the server itself)
export async function openForPage(modelId, choice, probed, serverIds, panel, options) {
  panel.warn(null);
  const {override, server, why} = chooseOverride(choice, modelId, probed, serverIds);
  if (server) return {opened: await openOnServer(modelId), why};
  try {
    return {opened: await openModel(modelId, probed, override, panel, options), why: ''};
  } catch (err) {
    if (!(err instanceof NoRightBackend) || !serverIds.includes(modelId)) throw err;
    return {opened: await openOnServer(modelId), why: NO_RIGHT_BACKEND};
  }
}
