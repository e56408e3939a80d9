import { defineConfig } from 'vitest/config';

/**
 * The image lane, apart from `npm test` (whose projects in vitest.config.ts never include
 * test/images): `SHOAL_IMAGE_TESTS=1 npx vitest run --config vitest.images.config.ts` builds the
 * images (scripts/images/build-images.sh) and runs them with a Docker engine (docs/deploy.md
 * "Image lane"). Without SHOAL_IMAGE_TESTS=1 its tests are skipped. One file, in order: the checks
 * share the containers they start (NATS, a worker, the gateway).
 */
export default defineConfig({
  test: {
    include: ['test/images/**/*.test.ts'],
    exclude: ['dist/**', 'node_modules/**', 'scratch/**'],
    testTimeout: 600_000,
    hookTimeout: 45 * 60_000,
    pool: 'forks',
    fileParallelism: false,
  },
});
