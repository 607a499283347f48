import { existsSync, readFileSync } from "node:fs";
import { relative } from "node:path";
import { fileURLToPath } from "node:url";
import { BaseSequencer, type TestSpecification } from "vitest/node";
import { configDefaults, defineConfig } from "vitest/config";

const root = fileURLToPath(new URL("./", import.meta.url));
const alias = { "@": root };

/** Each file's duration in seconds by `project:path`, from a full run (bin/record-test-durations.mjs). */
const recorded: Record<string, number> = (() => {
  const file = fileURLToPath(new URL("./test/durations.json", import.meta.url));
  return existsSync(file) ? JSON.parse(readFileSync(file, "utf8")) : {};
})();

/**
 * The files that took longest last time first, and files never run before ahead of all: the two forks then finish
 * together instead of one waiting on a long file started last. "Last time" is this machine's cache, else
 * test/durations.json (a fresh clone, as CI runs: without it every file was new, they ran in the order found, and
 * CI's suite took 1175 s for 2033 s of tests on two forks). (Vitest's own order falls back to file size whenever one
 * of two files lacks a cached result, which puts short files of long tests at the end.)
 */
class LongestFirst extends BaseSequencer {
  async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const cache = this.ctx.cache;
    const lastDuration = (file: TestSpecification) => {
      const key = `${file.project.name}:${relative(this.ctx.config.root, file.moduleId)}`;
      const cached = cache.getFileTestResults(key)?.duration;
      if (cached !== undefined) return cached;
      return key in recorded ? recorded[key]! * 1000 : Number.POSITIVE_INFINITY;
    };
    const durations = new Map(files.map((file) => [file, lastDuration(file)]));
    return [...files].sort((a, b) => {
      const [da, db] = [durations.get(a)!, durations.get(b)!];
      return da === db ? 0 : da > db ? -1 : 1;
    });
  }
}

// bin/test.mjs (`npm test`) runs these projects and provides what they need (a PostgreSQL server, Chromium, the
// workbench built).
export default defineConfig({
  resolve: { alias },
  test: {
    pool: "forks",
    // Two forks on two cores, shared by every project. The end-to-end files take a fork like any other: in a fork
    // of their own (singleFork) vitest would run them one by one after all the others, while their servers and
    // browsers wait as much as they compute.
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 300_000,
    sequence: { sequencer: LongestFirst },
    projects: [
      { extends: true, test: { name: "unit", include: ["test/unit/**/*.test.ts"], environment: "node" } },
      {
        extends: true,
        test: { name: "integration-pglite", include: ["test/integration/**/*.test.ts"], env: { TINKERLAB_TEST_DB: "pglite" } },
      },
      {
        extends: true,
        test: {
          name: "integration-postgres",
          include: ["test/integration/**/*.test.ts"],
          // Files whose database work is no more than any other file's (their subject is validation processes,
          // request gates, HTTP routes, a client's retries, a game's training) run once, on PGlite, which is
          // PostgreSQL too. Every file that exercises the database itself (jobs, leases, sessions, idempotency,
          // access, accounts, LISTEN/NOTIFY, reports, names) runs on both.
          exclude: [
            ...configDefaults.exclude,
            ...[
              "validation-pool",
              "validation-load",
              "validate",
              "rate-limits",
              "request-limits",
              "onnx-route",
              "multi-agent-self-play",
              "client-follow",
              "idempotent-client",
              "checkpoint-fallback",
              "imported-bases",
              "downloads",
              "launch-refusals",
            ].map((name) => `test/integration/${name}.test.ts`),
          ],
          env: { TINKERLAB_TEST_DB: "postgres" },
        },
      },
      { extends: true, test: { name: "e2e", include: ["test/e2e/**/*.test.ts"], globalSetup: ["test/e2e/global-setup.ts"] } },
    ],
  },
});
