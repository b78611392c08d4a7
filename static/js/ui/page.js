// What every page's DOM carries: the JSON the server rendered into it (#page-data:
// server/pages.py) and the backend badge (#backend-badge).

export function pageData() {
  const node = document.getElementById('page-data');
  return node ? JSON.parse(node.textContent || '{}') : {};
}

export function showBackend(name) {
  const badge = document.getElementById('backend-badge');
  if (!badge) return;
  badge.textContent = `backend: ${name}`;
  badge.dataset.backend = name;
}
