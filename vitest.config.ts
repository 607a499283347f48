import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

const alias = { "@": fileURLToPath(new URL("./", import.meta.url)) };

// bin/test.mjs (`npm test`) runs these projects and provides what they need (a PostgreSQL server, Chromium).
export default defineConfig({
  resolve: { alias },
  test: {
    pool: "forks",
    // Two forks on two cores: the end-to-end files (one fork of their own, in order) run beside unit and integration
    // files, which wait on the e2e servers' and browsers' work anyway. Vitest's default is cores - 1.
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 300_000,
    projects: [
      { extends: true, test: { name: "unit", include: ["test/unit/**/*.test.ts"], environment: "node" } },
      {
        extends: true,
        test: { name: "integration-pglite", include: ["test/integration/**/*.test.ts"], env: { TINKERLAB_TEST_DB: "pglite" } },
      },
      {
        extends: true,
        test: { name: "integration-postgres", include: ["test/integration/**/*.test.ts"], env: { TINKERLAB_TEST_DB: "postgres" } },
      },
      {
        extends: true,
        test: {
          name: "e2e",
          include: ["test/e2e/**/*.test.ts"],
          globalSetup: ["test/e2e/global-setup.ts"],
          poolOptions: { forks: { singleFork: true } },
        },
      },
    ],
  },
});
