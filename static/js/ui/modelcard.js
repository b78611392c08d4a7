// The chosen model's card (#model-card): the JSON server/cards.py built, embedded in the page
// by templates/_model_card.html (the same JSON as GET /api/v1/models/<id>), rendered here and
// re-rendered when the model picker changes. Text comes from the card; this file only lays it out.
const $ = (id) => document.getElementById(id);

// el('dd', {className: 'x'}, 'text', child) -> element; null/false children are skipped.
function el(tag, props = {}, ...children) {
  const node = Object.assign(document.createElement(tag), props);
  node.append(...children.filter((c) => c != null && c !== false));
  return node;
}

function megabytes(bytes) {
  return `${(bytes / 1048576).toFixed(1)} MB`;
}

function link(url, text) {
  // Only http(s) links: a manifest is data, not markup.
  return /^https?:\/\//i.test(url || '') ? el('a', {href: url, rel: 'noreferrer', textContent: text || url}) : null;
}

// sha256: its first 8 hex digits at a glance, the whole digest on hover and when expanded.
function digest(sha256, prefix, label = 'sha256') {
  const short = el('code', {className: 'sha-prefix', title: sha256, textContent: prefix});
  short.dataset.sha256 = sha256;
  return el('details', {className: 'sha'}, el('summary', {}, `${label} `, short), el('code', {className: 'sha-full'}, sha256));
}

function sourceRow(source) {
  const bits = [source.kind];
  if (source.package) bits.push(source.package);
  const dd = el('dd', {}, bits.join(' · '));
  const url = link(source.url);
  if (url) dd.append(' · ', url);
  if (source.sha256) dd.append(digest(source.sha256, source.sha256_prefix));
  else if (source.note) dd.append(' · ', el('code', {}, source.note));
  const parts = (source.parts || []).filter((p) => p.sha256);
  if (parts.length) {
    dd.append(el('details', {}, el('summary', {}, `${parts.length} parts`),
                 el('ul', {}, ...parts.map((p) => el('li', {}, `${p.part} `, el('code', {title: p.sha256}, p.sha256))))));
  }
  return dd;
}

function licenceRow(licence) {
  const dd = el('dd', {className: licence.name === 'unknown' ? 'muted' : ''}, link(licence.url, licence.name) || licence.name);
  if (licence.note) dd.append(el('span', {className: 'muted'}, ` (${licence.note})`));
  return dd;
}

function sizesRow(card) {
  const {browser, server} = card.sizes;
  const q = card.quantization;
  const quant = q.browser === q.server ? q.browser : `browser ${q.browser}, server ${q.server}`;
  return el('dd', {},
            `browser: TF.js ${megabytes(browser.tfjs_bytes)} / .tflite ${megabytes(browser.tflite_bytes)}`,
            ` · server: .tflite ${megabytes(server.tflite_bytes)}`,
            ` · quantisation: ${quant === 'none' ? 'none (float32)' : quant}`);
}

function parityRow(parity) {
  if (!parity) return el('dd', {className: 'muted'}, 'not measured by this build');
  const dd = el('dd', {}, el('span', {className: 'parity-text'}, parity.text));
  dd.dataset.relative = String(parity.relative);
  dd.append(parity.passed ? el('span', {className: 'ok', title: `target ${parity.target_relative}`}, ' ✓')
                          : el('span', {className: 'warn'}, ' (over target)'));
  const more = [];
  if (parity.reference_detail) more.push(`reference: ${parity.reference} ${parity.reference_version || ''} (${parity.reference_detail})`);
  else if (parity.reference_version) more.push(`reference: ${parity.reference} ${parity.reference_version}`);
  if (parity.backend) more.push(`TF.js backend: ${parity.backend}`);
  for (const p of parity.parts || []) more.push(p.text);
  if (parity.server) more.push(parity.server);
  if (more.length) dd.append(el('details', {}, el('summary', {}, 'details'), el('ul', {}, ...more.map((t) => el('li', {}, t)))));
  return dd;
}

function builtRow(card) {
  const date = card.created ? card.created.replace('T', ' ').replace(/:\d\d(\.\d+)?(\+00:00|Z)$/, ' UTC') : 'unknown';
  const tools = Object.entries(card.tools).filter(([, v]) => v != null).map(([k, v]) => `${k} ${v}`);
  return el('dd', {}, date,
            tools.length ? el('details', {}, el('summary', {}, 'tool versions'), el('p', {}, tools.join(' · '))) : null);
}

// The backend a visitor's model is checked against, in words.
const REFERENCES = {'litert-wasm': 'LiteRT.js on WASM', 'onnx-wasm': 'ONNX Runtime on WASM', wasm: 'TF.js on WASM'};

// A model the visitor gave (ui/model-drop.js): what its own metadata says.
function userRows(card) {
  const {file, bytes, metadata} = card.user;
  const names = card.labels.length > 6 ? `${card.labels.slice(0, 6).join(', ')}… (${card.labels.length})` : card.labels.join(', ');
  return [
    ['Source', el('dd', {}, `your file ${file} · ${megabytes(bytes)} · run in this browser only, never uploaded`)],
    ['Made by', el('dd', {}, [metadata.author, metadata.version && `version ${metadata.version}`, metadata.date].filter(Boolean).join(' · ') || 'not said')],
    ['Licence', el('dd', {className: metadata.license ? '' : 'muted'}, metadata.license || 'not said in the file')],
    card.user.format ? ['Format', el('dd', {}, card.user.format)] : null,
    ['Classes', el('dd', {}, names)],
    card.kpt_shape ? ['Keypoints', el('dd', {}, `${card.kpt_shape[0]} of ${card.kpt_shape[1]} values`)] : null,
    ['Checked', el('dd', {}, `each backend against ${REFERENCES[card.answer_reference] || 'LiteRT.js on WASM'} (no source framework here)`)],
  ].filter(Boolean);
}

// What an installed model finds: its classes (the first few, all on hover), keypoints, and
// the release checkpoint it was built from.
function findsRow(finds) {
  const names = finds.classes || [];
  const shown = names.length > 6 ? `${names.slice(0, 6).join(', ')}… (${names.length} classes)` : names.join(', ');
  const bits = [finds.group_label, shown, finds.keypoints ? `${finds.keypoints} keypoints each` : null].filter(Boolean);
  const dd = el('dd', {title: names.join(', ')}, bits.join(' · '));
  if (finds.checkpoint) dd.append(el('span', {className: 'muted'}, ` (from ${finds.checkpoint}, ${finds.trained_on})`));
  return dd;
}

export function renderCard(container, card) {
  container.hidden = !card;
  if (!card) return;
  const tags = [card.task, card.input ? `${card.input.width}×${card.input.height} input` : null];
  const rows = card.user ? userRows(card) : [
    card.finds && card.finds.classes ? ['Finds', findsRow(card.finds)] : null,
    ['Source', sourceRow(card.source)],
    ['Licence', licenceRow(card.licence)],
    ['Size', sizesRow(card)],
    ['Parity', parityRow(card.parity)],
    card.speed ? ['Speed', el('dd', {}, card.speed.text)] : null,
    card.agreement ? ['Accuracy', el('dd', {}, card.agreement.text)] : null,
    ['Built', builtRow(card)],
  ].filter(Boolean);
  container.replaceChildren(
    el('h2', {}, card.title, ...tags.filter(Boolean).map((t) => el('span', {className: 'tag'}, t))),
    el('dl', {}, ...rows.flatMap(([name, dd]) => [el('dt', {}, name), dd])));
  container.dataset.model = card.id;
}

const cards = {};
let show = () => {};

// A card for a model the page adds itself (ui/model-drop.js); shown if it is the one picked.
export function addCard(id, card) {
  cards[id] = card;
  show();
}

// After the picker was set from code (no change event).
export function refreshCard() {
  show();
}

function main() {
  const container = $('model-card');
  const select = $('model-select');
  const data = $('model-cards');
  if (!container || !select || !data) return;
  Object.assign(cards, JSON.parse(data.textContent));
  show = () => renderCard(container, cards[select.value]);
  select.addEventListener('change', show);
  show();
}

main();
