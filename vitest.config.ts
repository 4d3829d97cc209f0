import { defineConfig } from "vitest/config";

// One run covers the unit tests beside the code (packages/*/src) and the cross-package
// integration tests (test/), which start real vgpud processes from the built dist/.
export default defineConfig({
  test: {
    include: ["packages/*/src/**/*.test.ts", "test/**/*.test.ts"],
    exclude: ["**/node_modules/**", "**/dist/**"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: "forks",
  },
});
