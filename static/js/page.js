// Demo pages: load the selected model on the default backend with byte progress and a
// warm-up pass, and report it. The demos build on this state.
import {probeBackends, defaultBackend, useBackend, loadModel, warmUp, pageData} from './runtime.js';

const data = pageData();

function modelUrl(model) {
  const tfjs = model.tfjs || {};
  const first = tfjs.model || Object.values(tfjs)[0];
  return first ? `/models/${encodeURIComponent(model.id)}/${first}` : null;
}

async function load(model) {
  const status = document.getElementById('status-line');
  const bar = document.getElementById('load-progress');
  const text = document.getElementById('load-text');
  bar.parentElement.hidden = false;
  const url = modelUrl(model);
  const started = performance.now();
  const graph = await loadModel(url, (fraction) => {
    bar.value = fraction;
    text.textContent = `${Math.round(fraction * 100)}%`;
  });
  const loadMs = performance.now() - started;
  status.textContent = 'Warming up…';
  const warmMs = await warmUp(graph);
  bar.parentElement.hidden = true;
  const panel = document.getElementById('model-status');
  panel.dataset.state = 'ready';
  panel.dataset.model = model.id;
  status.textContent = `${model.title} ready on ${globalThis.tf.getBackend()}: loaded in ${loadMs.toFixed(0)} ms, warm-up ${warmMs.toFixed(0)} ms.`;
  return graph;
}

async function main() {
  const probed = await probeBackends();
  const backend = defaultBackend(probed);
  if (!backend) throw new Error('no TF.js backend works in this browser');
  await useBackend(backend);
  const models = data.models || [];
  const select = document.getElementById('model-select');
  if (!select || !models.length) return;
  let current = await load(models.find((m) => m.id === select.value) || models[0]);
  select.addEventListener('change', async () => {
    current.dispose();
    current = await load(models.find((m) => m.id === select.value));
  });
}

main().catch((err) => {
  const status = document.getElementById('status-line');
  if (status) {
    status.textContent = `Could not start: ${err.message}`;
    document.getElementById('model-status').dataset.state = 'error';
  }
});
