// A small key -> value store in IndexedDB, for what the visitor made or gave on a page (their
// gesture set, a model file): it survives reloads, works offline and is only on this device
// (nothing is sent).
const DB = 'datarailroad';
const SETS = 'user-sets';
export const MODELS = 'user-models';
const VERSION = 2;   // 2 added MODELS

function open() {
  return new Promise((resolve, reject) => {
    const request = indexedDB.open(DB, VERSION);
    request.onupgradeneeded = () => {
      for (const name of [SETS, MODELS]) {
        if (!request.result.objectStoreNames.contains(name)) request.result.createObjectStore(name);
      }
    };
    request.onsuccess = () => resolve(request.result);
    request.onerror = () => reject(request.error);
  });
}

async function run(storeName, mode, action) {
  const db = await open();
  try {
    return await new Promise((resolve, reject) => {
      const tx = db.transaction(storeName, mode);
      const request = action(tx.objectStore(storeName));
      tx.oncomplete = () => resolve(request.result);
      tx.onerror = () => reject(tx.error);
      tx.onabort = () => reject(tx.error || new Error('the browser refused to save'));
    });
  } finally {
    db.close();
  }
}

export const loadValue = (key, storeName = SETS) => run(storeName, 'readonly', (store) => store.get(key));
export const saveValue = (key, value, storeName = SETS) => run(storeName, 'readwrite', (store) => store.put(value, key));
export const deleteValue = (key, storeName = SETS) => run(storeName, 'readwrite', (store) => store.delete(key));
export const allValues = (storeName = SETS) => run(storeName, 'readonly', (store) => store.getAll());
