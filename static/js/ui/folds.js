// Folds: <details class="fold" data-fold="name"> around a page's model card and advanced
// controls. Open by default on a wide screen, folded on a phone (PHONE is the media query of
// static/css/app.css's phone layout), and once the visitor opens or closes one, remembered
// per page and fold (localStorage) over the default.
// A classic script right after <main> (templates/base.html), not a module: modules run after
// the TF.js scripts, and a phone would first show every fold open, then see them shut.
(() => {
  'use strict';
  const PHONE = '(max-width: 700px), (max-height: 500px)';
  const PREFIX = 'datarailroad.fold:';
  const phone = window.matchMedia(PHONE);
  const folds = Array.from(document.querySelectorAll('details.fold[data-fold]'));
  // The state this script last gave each fold: its toggle event is not the visitor's choice.
  const given = new Map();

  const key = (fold) => `${PREFIX}${window.location.pathname}:${fold.dataset.fold}`;

  function remembered(fold) {
    try {
      const state = window.localStorage.getItem(key(fold));
      return state === 'open' || state === 'closed' ? state === 'open' : null;
    } catch {
      return null;   // storage blocked: the default
    }
  }

  function remember(fold) {
    try {
      window.localStorage.setItem(key(fold), fold.open ? 'open' : 'closed');
    } catch {
      // storage blocked or full: this visit keeps the choice, the next gets the default
    }
  }

  function applyDefaults() {
    for (const fold of folds) {
      const open = remembered(fold) ?? !phone.matches;
      given.set(fold, open);
      fold.open = open;
    }
  }

  for (const fold of folds) {
    fold.addEventListener('toggle', () => {
      const byScript = given.get(fold) === fold.open;
      given.delete(fold);
      if (!byScript) remember(fold);
    });
  }
  applyDefaults();
  // A phone turned sideways, a window resized: folds nobody chose for follow the screen.
  phone.addEventListener('change', applyDefaults);
})();
