// Registers the service worker (/sw.js, rendered from templates/sw.js) that keeps the app
// usable offline. A page it does not control yet (the first visit: a worker only controls
// pages opened after it is active) tells it what it fetched, runtimes and models included,
// so that one visit is enough to work offline.
const SW_URL = '/sw.js';
const SKIP = /^\/(api\/|healthz|readyz|sw\.js)/;   // never cached

function worthCaching(url) {
  const parsed = new URL(url, location.href);
  return parsed.origin === location.origin && !SKIP.test(parsed.pathname);
}

function reportFetched(registration) {
  new PerformanceObserver((list) => {
    const urls = list.getEntries().map((entry) => entry.name).filter(worthCaching);
    if (urls.length && registration.active) registration.active.postMessage({type: 'cache-used', urls});
  }).observe({type: 'resource', buffered: true});
}

async function register() {
  // Service workers need a secure context (HTTPS, or http://localhost / 127.0.0.1).
  if (!('serviceWorker' in navigator) || !isSecureContext) return;
  await navigator.serviceWorker.register(SW_URL, {scope: '/'});
  if (navigator.serviceWorker.controller) return;   // it sees this page's requests itself
  reportFetched(await navigator.serviceWorker.ready);
}

register().catch((err) => console.warn(`Offline support is off: ${err.message}`));
