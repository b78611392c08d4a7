// The manifests a page opens models by: an installed model's manifest.json from the server
// (contract/manifest.js reads it), or one made in this page for a model the visitor gave
// (runtime/model-file.js), by id.

// Manifests made in this page (a model the visitor gave), by id.
const local = new Map();

export function registerManifest(manifest) {
  local.set(manifest.id, manifest);
}

export function forgetManifest(modelId) {
  local.delete(modelId);
}

export async function fetchManifest(modelId) {
  if (local.has(modelId)) return local.get(modelId);
  let response;
  try {
    response = await fetch(`/models/${encodeURIComponent(modelId)}/manifest.json`);
  } catch (err) {
    // Offline, the service worker answers only for models used before (templates/sw.js).
    if (navigator.onLine === false) {
      throw new Error(`${modelId} is not in this browser's offline copy: open this page once while online`);
    }
    throw err;
  }
  if (!response.ok) throw new Error(`manifest of ${modelId}: HTTP ${response.status}`);
  return response.json();
}
