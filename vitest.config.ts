import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Integration suites start real redis-server / HBase processes; run files one at a time
    // so two suites never race for CPU on a 2-core CI box and timeouts stay meaningful.
    fileParallelism: false,
    testTimeout: 60_000,
    hookTimeout: 180_000,
    reporters: ['default'],
  },
});
