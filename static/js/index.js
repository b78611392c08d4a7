// Start page: report which backends (TF.js and LiteRT.js) work in this browser, with why
// not where one doesn't, and which one the demos likely use.
import {probeBackends, defaultBackend, showBackend, timingCandidates, hasFastBackend} from './runtime.js';

async function main() {
  const probed = await probeBackends();
  const chosen = defaultBackend(probed);
  const body = document.querySelector('#backend-table tbody');
  for (const p of probed) {
    const row = document.createElement('tr');
    row.dataset.backend = p.name;
    row.dataset.ok = p.ok ? 'yes' : 'no';
    for (const text of [p.name + (p.name === chosen ? ' (used)' : ''), p.ok ? 'yes' : 'no', p.note]) {
      const cell = document.createElement('td');
      cell.textContent = text;
      row.append(cell);
    }
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
    summary.textContent = `Each demo times ${timed.map((n) => n.toUpperCase()).join(' and ')} on its model once ` +
      `and keeps the faster; ${chosen.toUpperCase()} is the likely one here (you can switch on each page).`;
  }
  if (chosen) showBackend(chosen);
}

main().catch((err) => {
  document.getElementById('backend-summary').textContent = `Backend check failed: ${err.message}`;
});
