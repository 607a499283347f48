/**
 * The Tinkerlab command line.
 *
 *   tinkerlab start [--dev]   the workbench (web server, scheduler, local workers) on PORT, default 3000
 *   tinkerlab worker          a worker: joins TINKERLAB_SERVER_URL with TINKERLAB_WORKER_TOKEN, or, with only
 *                             DATABASE_URL, takes work straight from that PostgreSQL server
 *
 * Configuration comes from the environment (see README: DATABASE_URL, PGLITE_DATA_DIR, PORT, HOST, …).
 */
import { StartupError } from "../server/db";
import { ConfigError, serverEnv } from "../server/env";
import { startWebServer } from "../server/web-server";
import { databaseChannel, httpChannel } from "../server/worker/channel";
import { runWorker } from "../server/worker/worker-process";

const USAGE = "usage: tinkerlab start [--dev] | tinkerlab worker";

async function main(argv: string[]) {
  const [command, ...rest] = argv;
  switch (command) {
    case "start": {
      const unknown = rest.filter((arg) => arg !== "--dev");
      if (unknown.length) fail(`unknown option ${unknown.join(" ")}\n${USAGE}`);
      const env = serverEnv();
      const server = await startWebServer(env, { dev: rest.includes("--dev"), workerEnv: process.env });
      const db = server.database;
      console.log(`Tinkerlab is ready at ${server.url}`);
      console.log(`  database: ${db.kind} (${db.location}), migration ${db.migration.latest}`);
      const stop = async (signal: string) => {
        console.log(`\n${signal}: shutting down`);
        await server.close().catch(() => {});
        process.exit(0);
      };
      process.once("SIGINT", () => void stop("SIGINT"));
      process.once("SIGTERM", () => void stop("SIGTERM"));
      return;
    }
    case "worker": {
      if (rest.length) fail(`unknown option ${rest.join(" ")}\n${USAGE}`);
      const env = serverEnv();
      const log = (line: string) => console.log(`[worker ${process.pid}] ${line}`);
      let channel;
      if (env.TINKERLAB_SERVER_URL || env.TINKERLAB_WORKER_TOKEN) {
        if (!env.TINKERLAB_SERVER_URL || !env.TINKERLAB_WORKER_TOKEN) {
          fail("a worker joining a server needs both TINKERLAB_SERVER_URL (e.g. http://host:3000) and TINKERLAB_WORKER_TOKEN (the server's worker token)");
        }
        channel = httpChannel(env.TINKERLAB_SERVER_URL, env.TINKERLAB_WORKER_TOKEN);
      } else if (env.DATABASE_URL) {
        channel = await databaseChannel(env.DATABASE_URL, { log });
      } else {
        fail(
          "a worker needs either DATABASE_URL (the PostgreSQL server the workbench uses: it takes work from there directly) " +
            "or TINKERLAB_SERVER_URL and TINKERLAB_WORKER_TOKEN (to join a server, e.g. one on the embedded database)",
        );
      }
      await runWorker({
        channel,
        artifactsDir: env.ARTIFACTS_DIR,
        backend: env.TINKERLAB_BACKEND,
        memoryShare: env.TINKERLAB_WORKER_MEMORY_SHARE,
        computeSlots: env.TINKERLAB_WORKER_SLOTS,
        exitWithParent: env.TINKERLAB_WORKER_EXIT_WITH_PARENT === "on",
        log,
      });
      return;
    }
    case undefined:
    case "--help":
    case "help":
      console.log(USAGE);
      return;
    default:
      fail(`unknown command '${command}'\n${USAGE}`);
  }
}

function fail(message: string): never {
  console.error(`tinkerlab: ${message}`);
  process.exit(2);
}

main(process.argv.slice(2)).catch((error: unknown) => {
  if (error instanceof StartupError || error instanceof ConfigError) {
    console.error(`tinkerlab: cannot start.\n${error.message}`);
    process.exit(1);
  }
  console.error(error);
  process.exit(1);
});
