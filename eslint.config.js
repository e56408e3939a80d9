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
);
