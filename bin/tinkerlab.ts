/**
 * The Tinkerlab command line.
 *
 *   tinkerlab start [--dev]   the workbench (web server, scheduler, workers) on PORT, default 3000
 *
 * Configuration comes from the environment (see README: DATABASE_URL, PGLITE_DATA_DIR, PORT, HOST, …).
 */
import { StartupError } from "../server/db";
import { ConfigError, serverEnv } from "../server/env";
import { startWebServer } from "../server/web-server";

const USAGE = "usage: tinkerlab start [--dev]";

async function main(argv: string[]) {
  const [command, ...rest] = argv;
  switch (command) {
    case "start": {
      const unknown = rest.filter((arg) => arg !== "--dev");
      if (unknown.length) fail(`unknown option ${unknown.join(" ")}\n${USAGE}`);
      const env = serverEnv();
      const server = await startWebServer(env, { dev: rest.includes("--dev") });
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
