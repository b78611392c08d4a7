// A small key -> value store in IndexedDB, for what the user made on a page (their gesture
// set): it survives reloads, works offline and is only on this device (nothing is sent).
const DB = 'datarailroad';
const STORE = 'user-sets';

function open() {
  return new Promise((resolve, reject) => {
    const request = indexedDB.open(DB, 1);
    request.onupgradeneeded = () => request.result.createObjectStore(STORE);
    request.onsuccess = () => resolve(request.result);
    request.onerror = () => reject(request.error);
  });
}

async function run(mode, action) {
  const db = await open();
  try {
    return await new Promise((resolve, reject) => {
      const tx = db.transaction(STORE, mode);
      const request = action(tx.objectStore(STORE));
      tx.oncomplete = () => resolve(request.result);
      tx.onerror = () => reject(tx.error);
      tx.onabort = () => reject(tx.error || new Error('the browser refused to save'));
    });
  } finally {
    db.close();
  }
}

export const loadValue = (key) => run('readonly', (store) => store.get(key));
export const saveValue = (key, value) => run('readwrite', (store) => store.put(value, key));
