/**
 * The Tinkerlab command line (commander; `--help` on every command).
 *
 *   tinkerlab start [--dev]            the workbench (web server, scheduler, local workers) on PORT, default 3000
 *   tinkerlab worker                   a worker: joins TINKERLAB_SERVER_URL with TINKERLAB_WORKER_TOKEN, or, with only
 *                                      DATABASE_URL, takes work straight from that PostgreSQL server
 *   tinkerlab login                    keeps a server's URL and API key for the commands below
 *   tinkerlab run <dir|config.json>    saves, validates and launches an experiment, and follows the run
 *   tinkerlab runs ls|logs|export      lists runs, prints a run's log, exports its metrics, rollouts and checkpoints
 *   tinkerlab runs tag|rename|archive|delete  manages runs as the workbench's runs table does
 *   tinkerlab experiments ls|push|pull lists experiments, saves a folder as a version, writes a version to a folder
 *   tinkerlab export <model>           a base or checkpoint as an ONNX file
 *   tinkerlab serve <model>            a base, checkpoint or run_…:latest through the server's /v1 endpoint
 *   tinkerlab bases ls|push|import     lists the bases; uploads a Hugging Face model folder to a server as a base;
 *                                      imports one on the server's own machine
 *
 * The server's configuration comes from the environment (see README: DATABASE_URL, PGLITE_DATA_DIR, PORT, HOST, …);
 * the client commands' server from --url, TINKERLAB_URL or `tinkerlab login`, their key from --key,
 * TINKERLAB_API_KEY or `tinkerlab login`.
 */
import { type RunState, runStates } from "../lib/lifecycle";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Command, Option } from "commander";
import * as commands from "./cli/commands";
import * as runsTable from "./cli/runs-table";
import { serve } from "./cli/serve";
import { cliErrorOf, compactCount, EXIT, type GlobalOptions, parseContextLength } from "./cli/context";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
/** How long `start` may take to shut down on a signal before it exits regardless. */
const SHUTDOWN_DEADLINE_MS = 15_000;

/** The server and worker run from the project folder (Next's folder, modules imported at run time). */
async function startServer(options: { dev?: boolean }) {
  process.chdir(ROOT);
  const { StartupError } = await import("../server/db");
  const { ConfigError, serverEnv } = await import("../server/env");
  const { startWebServer } = await import("../server/web-server");
  try {
    const env = serverEnv();
    const server = await startWebServer(env, { dev: options.dev === true, workerEnv: process.env });
    const db = server.database;
    console.log(`Tinkerlab is ready at ${server.url}`);
    console.log(`  database: ${db.kind} (${db.location}), migration ${db.migration.latest}`);
    // A signal stops the local workers (SIGTERM, SIGKILL after 5 s), the server and the database, then exits. The same
    // signal may come more than once (Ctrl-C reaches the terminal's whole process group, and npm and bin/start.mjs
    // pass it on): the first starts the shutdown, the others are ignored. Should any of it hang, the process exits at
    // the deadline anyway, and its workers leave as their stdin closes.
    let stopping = false;
    const stop = async (signal: NodeJS.Signals) => {
      if (stopping) return;
      stopping = true;
      console.log(`\n${signal}: shutting down`);
      setTimeout(() => {
        console.error(`tinkerlab: still shutting down after ${SHUTDOWN_DEADLINE_MS / 1000} s; exiting`);
        process.exit(1);
      }, SHUTDOWN_DEADLINE_MS).unref();
      await server.close().catch((error: unknown) => console.error("shutdown failed:", error));
      process.exit(0);
    };
    for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) process.on(signal, () => void stop(signal));
  } catch (error) {
    if (error instanceof StartupError || error instanceof ConfigError) {
      console.error(`tinkerlab: cannot start.\n${error.message}`);
      process.exit(1);
    }
    throw error;
  }
}

async function startWorker() {
  process.chdir(ROOT);
  const { ConfigError, serverEnv } = await import("../server/env");
  const { databaseChannel, httpChannel } = await import("../server/worker");
  const { runWorker } = await import("../server/worker/worker-process");
  let env;
  try {
    env = serverEnv();
  } catch (error) {
    if (error instanceof ConfigError) fail(`cannot start.\n${error.message}`, 1);
    throw error;
  }
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
}

/** Imports a Hugging Face model folder into this machine's ARTIFACTS_DIR, where the server and its workers read bases. */
async function importBase(dir: string, options: { name?: string; contextLength?: string; replace?: boolean; origin?: string; json?: boolean }) {
  const source = path.resolve(dir);
  process.chdir(ROOT);
  const { ConfigError } = await import("../server/env");
  const { importHFBase } = await import("../server/worker/base-import");
  let contextLength: number | undefined;
  try {
    contextLength = parseContextLength(options.contextLength);
  } catch (error) {
    fail((error as Error).message);
  }
  const started = Date.now();
  try {
    const record = importHFBase(source, { name: options.name, contextLength, replace: options.replace, origin: options.origin });
    if (options.json) console.log(JSON.stringify(record));
    else {
      const { config } = record;
      console.log(
        `Imported ${record.modelType} from ${record.source} as base '${record.name}' in ${((Date.now() - started) / 1000).toFixed(1)} s: ` +
          `${compactCount(record.parameters)} parameters, ${config.nLayers} layers, dModel ${config.dModel}, context ${config.contextLength} tokens, vocabulary ${config.vocabSize}.`,
      );
      console.log(`Name it as a run's base: "agent": { "base": "${record.name}" }`);
    }
  } catch (error) {
    if (error instanceof ConfigError) fail(`cannot import.\n${error.message}`, 1);
    fail((error as Error).message, 1);
  }
}

function fail(message: string, code: number = EXIT.usage): never {
  console.error(`tinkerlab: ${message}`);
  process.exit(code);
}

/** The options every client command takes. */
function clientCommand(command: Command): Command {
  return command
    .option("--url <url>", "the server (default: TINKERLAB_URL, else the one 'tinkerlab login' saved, else http://localhost:3000)")
    .option("--key <key>", "an API key, tl_… (default: TINKERLAB_API_KEY, else the one 'tinkerlab login' saved)")
    .option("--json", "print JSON for scripts instead of text");
}

/** Runs a client command's action; a refusal or an unreachable server is one line on stderr and its exit code. */
function action<A extends unknown[]>(run: (...args: A) => Promise<unknown>) {
  return async (...args: A) => {
    try {
      const code = await run(...args);
      process.exit(typeof code === "number" ? code : EXIT.ok);
    } catch (error) {
      const known = cliErrorOf(error);
      if (!known) throw error;
      fail(known.message, known.code);
    }
  };
}

const program = new Command("tinkerlab")
  .description("Reinforcement learning of language-model agents: the workbench, its workers, and a client of a running server.")
  .showHelpAfterError()
  .configureOutput({ outputError: (text, write) => write(`tinkerlab: ${text.replace(/^error: /, "")}`) })
  .exitOverride((error) =>
    process.exit(
      error.exitCode === 1 && error.code !== "commander.help" && error.code !== "commander.helpDisplayed" && error.code !== "commander.version"
        ? EXIT.usage
        : error.exitCode,
    ),
  );

program
  .command("start")
  .description("start the workbench: web server, scheduler and local workers (PORT, default 3000)")
  .option("--dev", "Next's development server, with hot reload")
  .action((options: { dev?: boolean }) => startServer(options));

program
  .command("worker")
  .description("start a worker that joins a server (TINKERLAB_SERVER_URL, TINKERLAB_WORKER_TOKEN) or takes work from DATABASE_URL")
  .action(() => startWorker());

clientCommand(program.command("login"))
  .description("check a server's URL and API key and keep them for the other commands")
  .action(action((options: GlobalOptions) => commands.login(options)));

clientCommand(program.command("run"))
  .description(
    "save a folder (experiment.json and its source files) as an experiment's next version, launch a run and follow it; exit code 0 completed, 1 failed, 4 cancelled, 3 when the server refuses what the editor refuses (it validates the code in the sandbox first)",
  )
  .argument("<target>", "a folder with experiment.json (and environment.ts, …), or a config .json file")
  .option("--no-follow", "launch and return at once with the run's id and URL")
  .option("-m, --message <text>", "the message of the version saved")
  .action(action((target: string, options: GlobalOptions & { follow?: boolean; message?: string }) => commands.run(target, options)));

clientCommand(program.command("export"))
  .description("download a built-in base or a checkpoint as an ONNX file (opset 17, key/value cache as inputs and outputs)")
  .argument("<model>", "a built-in base's name (e.g. arithmetic-base) or a checkpoint's id (ckpt_…)")
  .option("-o, --out <file>", "where to write it (default: <model>.onnx)")
  .action(action((name: string, options: GlobalOptions & { out?: string }) => commands.exportModel(name, options)));

clientCommand(program.command("serve"))
  .description("serve a model through the server's OpenAI-compatible endpoint (/v1): starts its serving job, waits while it loads, prints how to call it")
  .argument("<model>", "a base (e.g. generalist-base), a checkpoint id (ckpt_…) or a run's latest weights (run_…:latest)")
  .option("--no-wait", "print at once, without waiting for the model to load")
  .option("--timeout <seconds>", "how long to wait for the model to load", "120")
  .action(action((model: string, options: GlobalOptions & { wait?: boolean; timeout?: string }) => serve(model, options)));

const bases = program.command("bases").description("bases: list them, import a Hugging Face model");
clientCommand(bases.command("ls"))
  .description("list the bases a run may start from: built-in, imported, and your runs' checkpoints")
  .action(action((options: GlobalOptions) => commands.basesList(options)));
clientCommand(bases.command("push"))
  .description("upload a Hugging Face model folder to a server and import it there as a base (for the server's admin)")
  .argument("<dir>", "the model's folder (config.json, model.safetensors or shards, tokenizer.json, tokenizer_config.json)")
  .option("--name <name>", "the base's name (default: the folder's name)")
  .option("--context-length <tokens>", "longest sequence the base attends over (default: the model's, at most 2048)")
  .option("--replace", "replace an imported base of the same name")
  .action(action((dir: string, options: GlobalOptions & { name?: string; contextLength?: string; replace?: boolean }) => commands.basesPush(dir, options)));
bases
  .command("import")
  .description(
    "import a Hugging Face model folder (config.json, model.safetensors or shards, tokenizer.json, tokenizer_config.json) as a base, into this machine's ARTIFACTS_DIR: run it where the server runs",
  )
  .argument("<dir>", "the model's folder")
  .option("--name <name>", "the base's name (default: the folder's name)")
  .option("--context-length <tokens>", "longest sequence the base attends over (default: the model's, at most 2048)")
  .option("--replace", "replace an imported base of the same name")
  .option("--origin <text>", "where the model came from, for the record (default: the folder's path)")
  .option("--json", "print the import record as JSON")
  .action((dir: string, options: { name?: string; contextLength?: string; replace?: boolean; origin?: string; json?: boolean }) => importBase(dir, options));

const runs = program.command("runs").description("runs: list, logs, export, tag, rename, archive, delete");
clientCommand(runs.command("ls"))
  .description("list runs, newest first; with --sort or --tag, one project's runs as the workbench's runs table sorts and filters them")
  .option("--experiment <id>", "only this experiment's runs")
  .addOption(new Option("--status <status...>", "only runs in these states").choices(runStates))
  .option("--sort <column>", "sort by a column: status, steps, duration, tokens, seed, created, …, metric:<last|max|min|at<step>>:<name>, config:<dotted.path>")
  .addOption(new Option("--order <order>", "the sort's direction").choices(["asc", "desc"]).default("desc"))
  .option("--tag <tag...>", "only runs with every one of these tags")
  .option("--project <id>", "with --sort or --tag: the project (default: your first)")
  .option("--limit <n>", "at most this many", "20")
  .action(
    action(
      (options: GlobalOptions & { experiment?: string; status?: string[]; limit?: string; sort?: string; order?: string; tag?: string[]; project?: string }) =>
        options.sort || options.tag || options.project
          ? runsTable.runsTableList({ ...options, status: options.status?.filter((s): s is RunState => (runStates as readonly string[]).includes(s)) })
          : commands.runsList(options),
    ),
  );
clientCommand(runs.command("tag"))
  .description("add tags to a run, or take them off")
  .argument("<run>", "the run's id (run_…)")
  .argument("[tags...]", "tags to add")
  .option("--remove <tags...>", "tags to take off")
  .action(action((runId: string, tags: string[], options: GlobalOptions & { remove?: string[] }) => runsTable.runsTag(runId, tags, options)));
clientCommand(runs.command("rename"))
  .description("rename a run (names are unique in a project)")
  .argument("<run>", "the run's id (run_…)")
  .argument("<name>", "its new name")
  .action(action((runId: string, name: string, options: GlobalOptions) => runsTable.runsRename(runId, name, options)));
clientCommand(runs.command("archive"))
  .description("archive a run: the runs table hides it unless asked for archived runs")
  .argument("<run>", "the run's id (run_…)")
  .option("--undo", "bring it back")
  .action(action((runId: string, options: GlobalOptions & { undo?: boolean }) => runsTable.runsArchive(runId, options)));
clientCommand(runs.command("delete"))
  .description(
    "delete a finished run, all it recorded and its evaluations and exports; refused while a run starts from its checkpoints or a share link shows it",
  )
  .argument("<run>", "the run's id (run_…)")
  .option("--confirm <name>", "the run's name, to confirm")
  .action(action((runId: string, options: GlobalOptions & { confirm?: string }) => runsTable.runsDelete(runId, options)));
clientCommand(runs.command("logs"))
  .description("print a run's log")
  .argument("<run>", "the run's id (run_…)")
  .option("-f, --follow", "keep printing new lines until the run ends")
  .action(action((runId: string, options: GlobalOptions & { follow?: boolean }) => commands.runsLogs(runId, options)));
clientCommand(runs.command("export"))
  .description("write a run to a folder: run.json, metrics.csv, rollouts.jsonl, checkpoints.json (and each checkpoint's model with --onnx)")
  .argument("<run>", "the run's id (run_…)")
  .option("-o, --out <dir>", "the folder (default: the run's id)")
  .option("--onnx", "also download each checkpoint's model as ONNX")
  .action(action((runId: string, options: GlobalOptions & { out?: string; onnx?: boolean }) => commands.runsExport(runId, options)));

const experiments = program.command("experiments").description("experiments: list, push a folder, pull a version");
clientCommand(experiments.command("ls"))
  .description("list experiments")
  .option("--limit <n>", "at most this many", "50")
  .action(action((options: GlobalOptions & { limit?: string }) => commands.experimentsList(options)));
clientCommand(experiments.command("push"))
  .description("save a folder as its experiment's next version (a new experiment the first time; .tinkerlab.json remembers which)")
  .argument("<dir>", "a folder with experiment.json and its source files")
  .option("-m, --message <text>", "the version's message")
  .action(action((dir: string, options: GlobalOptions & { message?: string }) => commands.push(dir, options)));
clientCommand(experiments.command("pull"))
  .description("write an experiment's version (default: its latest) to a folder")
  .argument("<experiment>", "the experiment's id (exp_…)")
  .argument("[dir]", "the folder (default: the experiment's name)")
  .option("--version <n>", "this version instead of the latest")
  .action(action((experimentId: string, dir: string | undefined, options: GlobalOptions & { version?: string }) => commands.pull(experimentId, dir, options)));

program.parseAsync(process.argv).catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
