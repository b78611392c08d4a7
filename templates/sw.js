// DataRailroad's service worker: the app keeps working offline after one visit.
// Rendered by server/offline.py, which fills in BUILD (this deploy) and PRECACHE.
// - Pages and model manifests: network first; the cached copy when the network fails.
// - The app's JS/CSS and the vendored TF.js / LiteRT runtimes: from this build's cache
//   (precached at install, the rest on first use); a new deploy is a new worker with a new
//   cache, and activating it deletes the old ones.
// - Model files: cache first, each stored under the sha256 its manifest records (the
//   manifest is refreshed on every online visit), so a rebuilt model is fetched anew and
//   its old entries are deleted. Stored only when the bytes match that sha256.
// - Never the API (POSTs, answers computed per request), health checks or this script.
'use strict';

const BUILD = {{ build | tojson }};
const PRECACHE = {{ precache | tojson }};
const PAGES = {{ pages | tojson }};
const PREFIX = 'datarailroad-';
const APP_CACHE = `${PREFIX}app-${BUILD}`;
const MODEL_CACHE = `${PREFIX}models`;
const MANIFEST = /^\/models\/([^/]+)\/manifest\.json$/;
const MODEL_FILE = /^\/models\/([^/]+)\/(.+)$/;

self.addEventListener('install', (event) => {
  event.waitUntil(precache().then(() => self.skipWaiting()));
});

self.addEventListener('activate', (event) => {
  event.waitUntil(deleteOtherBuilds());
});

self.addEventListener('fetch', (event) => {
  const handler = handlerFor(event.request);
  if (handler) event.respondWith(handler(event.request, (promise) => event.waitUntil(promise)));
});

// A page this worker did not control yet (the first visit) lists what it fetched, in one
// message per batch of resource entries. Handled in order: a model file is stored under the
// version from its manifest, which an earlier message may still be storing.
let reported = Promise.resolve();
self.addEventListener('message', (event) => {
  const data = event.data || {};
  if (data.type !== 'cache-used' || !Array.isArray(data.urls)) return;
  reported = reported.then(() => cacheUsed(data.urls)).catch(() => {});
  event.waitUntil(reported);
});

async function precache() {
  const cache = await caches.open(APP_CACHE);
  const urls = [...new Set([...PRECACHE, ...await usedByOtherBuilds()])];
  // One file that fails (npm packages not installed) must not stop the others.
  await Promise.allSettled(urls.map(async (url) => {
    const response = await fetch(url, {cache: 'no-cache'});
    if (response.ok) await cache.put(url, response);
  }));
}

// Runtime files an older build kept on first use (the LiteRT .wasm this browser runs):
// fetched again for this build, so a deploy does not take them offline.
async function usedByOtherBuilds() {
  const urls = [];
  for (const name of await caches.keys()) {
    if (!name.startsWith(`${PREFIX}app-`) || name === APP_CACHE) continue;
    for (const request of await (await caches.open(name)).keys()) {
      const url = new URL(request.url);
      if (url.pathname.startsWith('/vendor/')) urls.push(url.pathname);
    }
  }
  return urls;
}

async function deleteOtherBuilds() {
  const names = await caches.keys();
  await Promise.all(names.filter((n) => n.startsWith(`${PREFIX}app-`) && n !== APP_CACHE)
    .map((n) => caches.delete(n)));
}

// -> handler(request, keepAlive) for the requests this worker answers; null: the network.
function handlerFor(request) {
  const url = new URL(request.url);
  if (request.method !== 'GET' || url.origin !== self.location.origin) return null;
  if (PAGES.includes(url.pathname)) return page;
  if (MANIFEST.test(url.pathname)) return manifest;
  if (MODEL_FILE.test(url.pathname)) return modelFile;
  if (url.pathname.startsWith('/static/') || url.pathname.startsWith('/vendor/')) return appFile;
  return null;
}

// A page is the same whatever its query (?model=, ?backend=): one entry per path.
async function page(request, keepAlive) {
  const key = new URL(request.url).pathname;
  const cache = await caches.open(APP_CACHE);
  try {
    const response = await fetch(request);
    if (response.ok) keepAlive(cache.put(key, response.clone()));
    return response;
  } catch (err) {
    return (await cache.match(key)) || Promise.reject(err);
  }
}

async function appFile(request, keepAlive) {
  const cache = await caches.open(APP_CACHE);
  const hit = await cache.match(request, {ignoreSearch: true});
  if (hit) return hit;
  const response = await fetch(request);
  if (response.ok) keepAlive(cache.put(request, response.clone()));
  return response;
}

// Stored before it is returned: the model files the page asks for next are looked up by it.
async function manifest(request, keepAlive) {
  const url = new URL(request.url);
  const cache = await caches.open(MODEL_CACHE);
  let response;
  try {
    response = await fetch(request);
  } catch (err) {
    return (await cache.match(url.pathname)) || Promise.reject(err);
  }
  if (response.ok) await cache.put(url.pathname, response.clone());
  else if (response.status === 404) await cache.delete(url.pathname);   // uninstalled
  if (response.ok || response.status === 404) keepAlive(pruneModel(cache, url.pathname.match(MANIFEST)[1]));
  return response;
}

async function modelFile(request, keepAlive) {
  const url = new URL(request.url);
  const [, id, file] = url.pathname.match(MODEL_FILE);
  const cache = await caches.open(MODEL_CACHE);
  const versions = await fileVersions(cache, id);
  const version = versions && versions(decodeURIComponent(file));
  const key = version && versionedKey(url.pathname, version);
  if (key) {
    const hit = await cache.match(key);
    if (hit) return hit;
  }
  const response = await fetch(request);
  if (key && response.ok) keepAlive(storeVerified(cache, key, version, response.clone()));
  return response;
}

function versionedKey(path, version) {
  return `${path}?sha256=${version}`;
}

const SHA256 = /^[0-9a-f]{64}$/;

async function sha256Hex(buffer) {
  const digest = await crypto.subtle.digest('SHA-256', buffer);
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, '0')).join('');
}

// The version of each file of model `id`, from its cached manifest: the file's sha256 from
// files_sha256, or, for manifests older than it, a hash of the whole manifest (a rebuild
// always rewrites it). -> file => version, or null when no manifest is cached.
async function fileVersions(cache, id) {
  const cached = await cache.match(`/models/${id}/manifest.json`);
  if (!cached) return null;
  const text = await cached.text();
  let digests = {};
  try {
    digests = JSON.parse(text).files_sha256 || {};
  } catch (err) { /* not JSON: whole-manifest versions */ }
  const whole = `manifest-${(await sha256Hex(new TextEncoder().encode(text))).slice(0, 16)}`;
  return (file) => digests[file] || whole;
}

// Bytes that do not match the manifest's sha256 (a build in progress) are not kept.
async function storeVerified(cache, key, version, response) {
  const bytes = await response.clone().arrayBuffer();
  if (SHA256.test(version) && await sha256Hex(bytes) !== version) return;
  await cache.put(key, response);
}

// Deletes a model's entries that its current manifest no longer names (a rebuilt or
// removed file), and everything of a model without a manifest (uninstalled).
async function pruneModel(cache, id) {
  const versions = await fileVersions(cache, id);
  const prefix = `${self.location.origin}/models/${id}/`;
  for (const request of await cache.keys()) {
    if (!request.url.startsWith(prefix)) continue;
    const url = new URL(request.url);
    if (url.pathname.endsWith('/manifest.json') && !url.search) continue;
    const file = decodeURIComponent(url.pathname.slice(`/models/${id}/`.length));
    if (!versions || url.searchParams.get('sha256') !== versions(file)) await cache.delete(request);
  }
}

// What a first visit fetched before this worker controlled it: cache the same way, the
// manifests first (model files are stored under the version their manifest gives).
async function cacheUsed(urls) {
  const requests = urls.map((u) => new URL(u, self.location.origin))
    .filter((url) => url.origin === self.location.origin)
    .map((url) => new Request(url.href));
  const pending = [];
  const keepAlive = (promise) => pending.push(promise);
  const isManifest = (r) => MANIFEST.test(new URL(r.url).pathname);
  for (const group of [requests.filter(isManifest), requests.filter((r) => !isManifest(r))]) {
    await Promise.allSettled(group.map(async (request) => {
      const handler = handlerFor(request);
      if (handler) await handler(request, keepAlive);
    }));
  }
  await Promise.allSettled(pending);
}
