// Start page: report which backends (TF.js and LiteRT.js) work in this browser, with why
// not where one doesn't; what the demos found when they checked each backend's answers
// (runtime/answer-records.js, per model), its warm time, and which backend each demo uses.
import {probeBackends, defaultBackend, timingCandidates, hasFastBackend} from '../runtime/runtime.js';
import {describeCheck} from '../contract/answers.js';
import {allRecords} from '../runtime/answer-records.js';
import {showBackend} from '../ui/page.js';

function cell(text) {
  const td = document.createElement('td');
  td.textContent = text;
  return td;
}

// A record's key names the demo's model: "<model id>" or "<model id>.<runtime>.<variant>".
function modelName(key) {
  return key.replace(/\.tfjs\./, ' ');
}

function formatMs(entry) {
  const ms = entry.ms ?? entry.warmMs;
  if (ms == null) return null;
  return `${ms.toFixed(0)} ms${entry.ms == null ? ' (first run)' : ''}`;
}

// Per backend: what each model's page recorded.
function backendRecords(records, backend) {
  const rows = records.filter((r) => r.backends[backend]).map((r) => ({key: r.key, ...r.backends[backend]}));
  return {
    check: rows.map((r) => `${modelName(r.key)}: ${describeCheck(r.check)}`).join('; '),
    warm: rows.map((r) => formatMs(r) && `${modelName(r.key)} ${formatMs(r)}`).filter(Boolean).join('; '),
    wrong: rows.some((r) => r.check && !r.check.ok),
    used: records.filter((r) => r.used === backend).map((r) => modelName(r.key)).join(', '),
  };
}

async function main() {
  const probed = await probeBackends();
  const chosen = defaultBackend(probed);
  const records = allRecords();
  const body = document.querySelector('#backend-table tbody');
  for (const p of probed) {
    const seen = backendRecords(records, p.name);
    const row = document.createElement('tr');
    Object.assign(row.dataset, {backend: p.name, ok: p.ok ? 'yes' : 'no', software: p.software ? 'yes' : 'no',
                                answers: seen.wrong ? 'wrong' : (seen.check ? 'checked' : 'unchecked')});
    row.append(cell(p.name + (p.name === chosen ? ' (likely)' : '')), cell(p.ok ? 'yes' : 'no'),
               cell(p.note + (p.software ? '; a software GPU: not timed while WASM works' : '')),
               cell(seen.check || (p.ok ? 'not checked yet' : '')), cell(seen.warm), cell(seen.used));
    if (seen.wrong) row.classList.add('wrong-answers');
    body.append(row);
  }
  const summary = document.getElementById('backend-summary');
  summary.dataset.backend = chosen || '';
  const timed = timingCandidates(probed);
  if (!hasFastBackend(probed)) {
    summary.textContent = 'No fast backend (TF.js or LiteRT.js) works in this browser: the demos will use the server instead.';
  } else if (timed.length === 1) {
    summary.textContent = `The demos will run on ${chosen.toUpperCase()} here (you can switch on each page).`;
  } else {
    summary.textContent = `Each demo checks the answers of ${timed.map((n) => n.toUpperCase()).join(' and ')} on ` +
      `its model, times them once and keeps the fastest that answers right; ${chosen.toUpperCase()} is the likely ` +
      'one here (you can switch on each page).';
  }
  if (chosen) showBackend(chosen);
}

main().catch((err) => {
  document.getElementById('backend-summary').textContent = `Backend check failed: ${err.message}`;
});

// ---- The offline copy: what the service worker (templates/sw.js) keeps, and a clear button ----

const CACHE_PREFIX = 'datarailroad-';   // the service worker's cache names

function cacheGroup(url) {
  const path = new URL(url).pathname;
  const model = path.match(/^\/models\/([^/]+)\//);
  if (model) return `model ${decodeURIComponent(model[1])}`;
  if (path.startsWith('/vendor/')) return 'runtimes (TF.js, LiteRT.js)';
  if (path.startsWith('/static/')) return 'app scripts, styles, icon';
  return 'pages';
}

async function responseBytes(response) {
  const length = Number(response.headers.get('Content-Length'));
  return length > 0 ? length : (await response.blob()).size;
}

async function ourCaches() {
  return (await caches.keys()).filter((name) => name.startsWith(CACHE_PREFIX));
}

// -> [{group, files, bytes}] in first-seen order
async function cachedGroups() {
  const groups = new Map();
  for (const name of await ourCaches()) {
    const cache = await caches.open(name);
    for (const request of await cache.keys()) {
      const response = await cache.match(request);
      const group = cacheGroup(request.url);
      const entry = groups.get(group) || {group, files: 0, bytes: 0};
      entry.files += 1;
      entry.bytes += response ? await responseBytes(response) : 0;
      groups.set(group, entry);
    }
  }
  return [...groups.values()];
}

function formatBytes(bytes) {
  const units = ['bytes', 'KB', 'MB', 'GB'];
  let i = 0;
  while (bytes >= 1024 && i < units.length - 1) {
    bytes /= 1024;
    i += 1;
  }
  return i ? `${bytes.toFixed(1)} ${units[i]}` : `${bytes} bytes`;
}

async function showOfflineCopy() {
  const summary = document.getElementById('cache-summary');
  const button = document.getElementById('cache-clear');
  if (!window.isSecureContext || !('serviceWorker' in navigator) || !('caches' in window)) {
    summary.textContent = 'Offline use needs a secure context: open the app over HTTPS (make run HTTPS=1) ' +
      'or on localhost.';
    summary.dataset.entries = '0';
    return;
  }
  const groups = await cachedGroups();
  const files = groups.reduce((n, g) => n + g.files, 0);
  const bytes = groups.reduce((n, g) => n + g.bytes, 0);
  document.querySelector('#cache-table tbody').replaceChildren(...groups.map((g) => {
    const row = document.createElement('tr');
    Object.assign(row.dataset, {group: g.group, files: String(g.files), bytes: String(g.bytes)});
    for (const text of [g.group, String(g.files), formatBytes(g.bytes)]) {
      const cell = document.createElement('td');
      cell.textContent = text;
      row.append(cell);
    }
    return row;
  }));
  let text = files ? `${files} files, ${formatBytes(bytes)}, kept for offline use.`
    : 'Nothing kept yet: open a demo once while online.';
  if (navigator.storage && navigator.storage.estimate) {
    const {usage, quota} = await navigator.storage.estimate();
    if (quota) text += ` This site uses ${formatBytes(usage)} of the ${formatBytes(quota)} this browser allows it.`;
  }
  summary.textContent = text;
  Object.assign(summary.dataset, {entries: String(files), bytes: String(bytes)});
  button.disabled = !files;
}

async function clearOfflineCopy() {
  await Promise.all((await ourCaches()).map((name) => caches.delete(name)));
  await showOfflineCopy();
}

document.getElementById('cache-clear').addEventListener('click', () => {
  clearOfflineCopy().catch((err) => {
    document.getElementById('cache-summary').textContent = `Could not clear: ${err.message}`;
  });
});
showOfflineCopy()
  // The worker precaches while installing; once it is active, show what it keeps.
  .then(() => 'serviceWorker' in navigator && navigator.serviceWorker.ready.then(showOfflineCopy))
  .catch((err) => {
    document.getElementById('cache-summary').textContent = `Could not read the offline copy: ${err.message}`;
  });
