// ESLint (flat config): bug rules (js.configs.recommended, no style) and the layers of static/js.
// `make lint` runs it beside ruff. The pages' modules are browser ES modules; TF.js is a global
// script (globalThis.tf); static/js/ui/folds.js is a classic script (templates/base.html); the
// converters' .mjs checks run in Node.
//
// The layers, each importing only from those below it (docs/development.md):
//   contract/  pure: plain JavaScript, no TF.js, no browser API at all; imports only contract/
//   tensor/    TF.js pre- and post-processing around a model runner it is given: TF.js, no DOM;
//              imports contract/ and tensor/
//   runtime/   model runners, files, storage, the server backend: no DOM (what a worker has, and
//              localStorage); imports contract/, tensor/ and runtime/
//   ui/        what draws or wires a panel: the DOM; never pages/
//   pages/     one controller per page, on top
// Each layer's languageOptions hold only the globals it may use (contract/ and tensor/: the
// language's own), so no-undef reports any other; no-restricted-globals and
// no-restricted-properties name the ones worth a message (globalThis.tf, document...).
import js from '@eslint/js';
import globals from 'globals';

// The DOM's usual entry points (for no-restricted-globals' messages; no-undef catches the rest).
const DOM = ['document', 'window', 'HTMLElement', 'HTMLCanvasElement', 'HTMLVideoElement', 'HTMLImageElement',
             'HTMLInputElement', 'HTMLSelectElement', 'Element', 'Node', 'NodeList', 'CustomEvent', 'getComputedStyle',
             'MutationObserver', 'Option', 'Image'];

const restrictedGlobals = (names, why) => ['error', ...names.map((name) => ({name, message: why}))];

// The global object's TF.js and DOM, reached as properties (globalThis.tf, self.document...).
const restrictedProperties = (props, why) => ['error', ...['globalThis', 'self', 'window']
  .flatMap((object) => props.map((property) => ({object, property, message: why})))];

// Static imports only from a module's own folder ('./name.js') and the folders `below`.
const importsOnly = (folder, below) => ['error', {patterns: [{
  regex: `^(?!${['\\./', ...below.map((f) => `\\.\\./${f}/`)].map((prefix) => `${prefix}[\\w.-]+$`).join('|')})`,
  message: `static/js/${folder}/ imports only from ${[folder, ...below].map((f) => `${f}/`).join(', ')}`,
}]}];

export default [
  {ignores: ['node_modules/', '.venv*/', 'models/', 'test-artifacts/', 'templates/']},
  js.configs.recommended,
  {
    files: ['static/js/**/*.js'],
    languageOptions: {ecmaVersion: 'latest', sourceType: 'module'},
  },
  {
    files: ['static/js/ui/**/*.js', 'static/js/pages/**/*.js'],
    languageOptions: {globals: {...globals.browser}},
  },
  {
    files: ['static/js/ui/folds.js'],
    languageOptions: {sourceType: 'script'},
  },
  {
    files: ['static/js/contract/**/*.js'],
    rules: {
      'no-restricted-globals': restrictedGlobals(['tf', 'fetch', 'localStorage', 'navigator', 'location', ...DOM],
                                                 'static/js/contract/ is pure: no TF.js, no DOM, no browser API'),
      'no-restricted-properties': restrictedProperties(['tf', 'document', 'fetch', 'localStorage', 'navigator'],
                                                       'static/js/contract/ is pure: no TF.js, no DOM, no browser API'),
      'no-restricted-imports': importsOnly('contract', []),
    },
  },
  {
    files: ['static/js/tensor/**/*.js'],
    rules: {
      'no-restricted-globals': restrictedGlobals(DOM, 'static/js/tensor/ uses TF.js (globalThis.tf), not the DOM'),
      'no-restricted-properties': restrictedProperties(['document'], 'static/js/tensor/ uses TF.js, not the DOM'),
      'no-restricted-imports': importsOnly('tensor', ['contract']),
    },
  },
  {
    files: ['static/js/runtime/**/*.js'],
    languageOptions: {globals: {...globals.worker, localStorage: 'readonly'}},
    rules: {
      'no-restricted-globals': restrictedGlobals(DOM, 'static/js/runtime/ touches no DOM: a page (ui/, pages/) passes what it needs'),
      'no-restricted-properties': restrictedProperties(['document'], 'static/js/runtime/ touches no DOM'),
      'no-restricted-imports': importsOnly('runtime', ['contract', 'tensor']),
    },
  },
  {
    files: ['static/js/ui/**/*.js'],
    rules: {
      'no-restricted-imports': importsOnly('ui', ['contract', 'tensor', 'runtime']),
    },
  },
  {
    files: ['**/*.mjs', 'eslint.config.js'],
    languageOptions: {ecmaVersion: 'latest', sourceType: 'module', globals: {...globals.node}},
  },
];
