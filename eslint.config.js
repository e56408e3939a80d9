// @ts-check
// `npm run lint` (run by .ci/run). typescript-eslint's recommended rules without type information
// (tsc --noEmit already type-checks; typed linting would double the time), plus the module map.
import tseslint from 'typescript-eslint';
import { layerImports } from './scripts/lint/layer-imports.js';

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'scratch/**', 'coverage/**', 'bench/results/**'] },
  ...tseslint.configs.recommended,
  {
    rules: {
      // A leading underscore marks a value left unused on purpose (a destructured field dropped, an
      // interface parameter an implementation does not need).
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', destructuredArrayIgnorePattern: '^_', ignoreRestSiblings: true }],
    },
  },
  {
    files: ['adapters/**/*.ts', 'pipelines/**/*.ts', 'services/**/*.ts'],
    plugins: { shoal: { rules: { 'layer-imports': layerImports } } },
    rules: { 'shoal/layer-imports': 'error' },
  },
  {
    // One frozen ShoalSettings per process (services/settings/shoal-settings.ts), built in each
    // main.ts from the environment: nothing else reads it, so what a process was configured with
    // is decided once, in one place.
    files: ['adapters/**/*.ts', 'pipelines/**/*.ts', 'services/**/*.ts'],
    ignores: ['services/settings/**', 'services/*/main.ts'],
    rules: {
      'no-restricted-properties': ['error', { object: 'process', property: 'env', message: 'read settings through ShoalSettings (services/settings), built once in main.ts' }],
    },
  },
);
