// ESLint (flat config): bug rules only (js.configs.recommended), no style. `make lint` runs it
// beside ruff. The pages' modules are browser ES modules; TF.js is a global script (globalThis.tf);
// static/js/ui/folds.js is a classic script (templates/base.html); the converters' .mjs checks run in Node.
import js from '@eslint/js';
import globals from 'globals';

export default [
  {ignores: ['node_modules/', '.venv*/', 'models/', 'test-artifacts/', 'templates/']},
  js.configs.recommended,
  {
    files: ['static/js/**/*.js'],
    languageOptions: {ecmaVersion: 'latest', sourceType: 'module', globals: {...globals.browser}},
  },
  {
    files: ['static/js/ui/folds.js'],
    languageOptions: {sourceType: 'script'},
  },
  {
    files: ['**/*.mjs', 'eslint.config.js'],
    languageOptions: {ecmaVersion: 'latest', sourceType: 'module', globals: {...globals.node}},
  },
];
