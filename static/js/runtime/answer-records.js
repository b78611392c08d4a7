// What each backend answered on the answer check (contract/answers.js judge), per model build,
// kept in localStorage: a backend recorded as wrong is skipped when a page chooses; the index
// page lists every record.

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
