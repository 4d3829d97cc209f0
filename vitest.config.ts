import { defineConfig } from "vitest/config";

// Two projects. `unit`: the tests beside the code (packages/*/src), the simulator and other
// in-process tests, run in parallel. `integration`: real vgpud processes (test/integration),
// one file at a time — each file starts pairs of daemons whose leases are timed, and running
// several at once on a 2-core machine would starve their timers. `system`: tests that also need
// external programs (etcd, prometheus, promtool, systemd-analyze), one file at a time; run by
// `npm run test:system` (CI installs the programs; outside CI a missing one skips loudly).
// `gpu`: tests that need a GPU adapter (`*.gpu.test.ts`, test/gpu), one file at a time; run
// only by `npm run test:gpu`, and they fail (never skip) where no adapter exists.
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
            "**/*.gpu.test.ts",
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
          include: ["packages/*/src/**/*.gpu.test.ts", "test/gpu/**/*.test.ts"],
          fileParallelism: false,
        },
      },
    ],
  },
});
