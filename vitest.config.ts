import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    exclude: ['dist/**', 'node_modules/**', 'scratch/**'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Inference runs in worker threads with their own ORT thread pools; running many
    // test files at once on a 2-core machine only makes each one slower and flakier.
    fileParallelism: false,
    pool: 'forks',
  },
});
