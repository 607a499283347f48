/**
 * The worker processes `tinkerlab start` runs on its own machine. Each is a child process, so a job that
 * crashes takes down its worker, never the web server; a worker that exits is started again after a pause.
 */
import { spawn, type ChildProcess } from "node:child_process";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { rolloutProcessFlags } from "./gc";

/**
 * The command line of a local worker, run by this same node binary (no PATH lookup, so the children start whatever
 * their environment): the Node flags (./gc.ts: on fewer than three cores, V8 marks on the main thread, leaving the
 * other core to a custom environment's sandbox), tsx's loader, then the script and its arguments. One process, not
 * tsx's command line, which would run the worker in a child of its own: the worker gets the SIGTERM itself, and
 * leaves when its step ends (tsx's command line SIGKILLs a child that does not acknowledge a signal within 30 ms).
 */
export function workerCommand(root: string, flags = rolloutProcessFlags(), script = path.join(root, "bin", "tinkerlab.ts"), args = ["worker"]): string[] {
  return [...flags, "--import", pathToFileURL(path.join(root, "node_modules", "tsx", "dist", "loader.mjs")).href, script, ...args];
}

export function startLocalWorkers(options: {
  count: number;
  serverUrl: string;
  token: string;
  root: string;
  env: NodeJS.ProcessEnv;
  log?: (line: string) => void;
  /** A worker's process ended unasked: its pid, and how ("was killed by SIGKILL", "exited with code 1"). */
  onExit?: (pid: number, how: string) => void;
}) {
  const log = options.log ?? console.log;
  const children = new Set<ChildProcess>();
  let closing = false;
  const command = workerCommand(options.root);
  const spawnOne = (index: number) => {
    const child = spawn(process.execPath, command, {
      cwd: options.root,
      // stdin is a pipe nobody writes to: when this process exits, however it exits, the system closes it, and the
      // worker sees its end and leaves (no orphaned workers heartbeating a server that is gone).
      stdio: ["pipe", "inherit", "inherit"],
      env: {
        ...options.env,
        TINKERLAB_WORKER_EXIT_WITH_PARENT: "on",
        TINKERLAB_SERVER_URL: options.serverUrl,
        TINKERLAB_WORKER_TOKEN: options.token,
        TINKERLAB_WORKER_MEMORY_SHARE: String(1 / options.count),
      },
    });
    children.add(child);
    child.on("exit", (code, signal) => {
      children.delete(child);
      if (closing) return;
      log(`local worker ${index} exited (${signal ?? code}); starting another in 2 s`);
      options.onExit?.(child.pid!, signal ? `was killed by ${signal}` : `exited with code ${code}`);
      setTimeout(() => !closing && spawnOne(index), 2000);
    });
  };
  for (let i = 0; i < options.count; i++) spawnOne(i);
  return {
    pids: () => [...children].map((c) => c.pid!),
    async stop() {
      closing = true;
      await Promise.all(
        [...children].map(
          (child) =>
            new Promise<void>((resolve) => {
              const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
              child.once("exit", () => {
                clearTimeout(timer);
                resolve();
              });
              child.kill("SIGTERM");
            }),
        ),
      );
    },
  };
}
