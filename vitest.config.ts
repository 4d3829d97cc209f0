import { defineConfig } from "vitest/config";

// Four projects. `unit`: the tests beside the code (packages/*/src), the simulator and other
// in-process tests, run in parallel. `integration`: real vgpud processes (test/integration),
// one file at a time — each file starts pairs of daemons whose leases are timed, and running
// several at once on a 2-core machine would starve their timers. `system`: tests that also need
// external programs (etcd, prometheus, promtool, systemd-analyze), one file at a time; run by
// `npm run test:system` (CI installs the programs; outside CI a missing one skips loudly).
// `gpu`: tests that need a GPU adapter (test/gpu: webgpu pairs), one file at a time; run by
// `npm run test:gpu` on a GPU host, never by `npm test`; without an adapter they fail.
export default defineConfig({
  test: {
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: "forks",
    projects: [
      {
        extends: true,
        test: {
          name: "unit",
          include: ["packages/*/src/**/*.test.ts", "test/**/*.test.ts"],
          setupFiles: ["test/setup/fast-check.ts"],
          exclude: [
            "**/node_modules/**",
            "**/dist/**",
            "test/integration/**",
            "test/system/**",
            "test/gpu/**",
          ],
        },
      },
      {
        extends: true,
        test: {
          name: "integration",
          include: ["test/integration/**/*.test.ts"],
          fileParallelism: false,
        },
      },
      {
        extends: true,
        test: {
          name: "system",
          include: ["test/system/**/*.test.ts"],
          fileParallelism: false,
        },
      },
      {
        extends: true,
        test: {
          name: "gpu",
          include: ["test/gpu/**/*.test.ts"],
          fileParallelism: false,
        },
      },
    ],
  },
});
