/**
 * The worker's side of its job host (./job-host.ts): starts the child process, hands it jobs, carries its calls to
 * the server through the worker's channel, and says how it ended when it dies with jobs in hand.
 */
import { type ChildProcess, fork } from "node:child_process";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import type { BackendPreference } from "../runtime";
import type { WorkerChannel } from "./channel";
import { rolloutProcessFlags } from "./gc";
import { crossedError, type HostMessage, hostCalls, revivedError, type WorkerMessage } from "./host-protocol";
import type { JobOutcome, JobSpec, StopReason } from "./run-job";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "..", "..");

/** Why a job host stopped: its exit code or the signal that killed it, in words. */
export class JobHostExit extends Error {
  constructor(
    readonly code: number | null,
    readonly signal: NodeJS.Signals | null,
  ) {
    super(describeExit(code, signal));
    this.name = "JobHostExit";
  }
}

function describeExit(code: number | null, signal: NodeJS.Signals | null): string {
  if (signal === "SIGKILL") return "its job process was killed (SIGKILL: out of memory, or killed by hand)";
  if (signal)
    return `its job process died of ${signal}${signal === "SIGSEGV" || signal === "SIGBUS" || signal === "SIGILL" ? " (a fault in native code)" : ""}`;
  return `its job process exited with code ${code}`;
}

export type JobHost = {
  pid: number;
  /** The backend the host computes with, once it has loaded it. */
  ready: Promise<{ backend: string; gpu: boolean }>;
  /** Runs a claimed job there; rejects with a JobHostExit when the host dies first. */
  run(input: { jobId: string; workerId: string; spec: JobSpec; artifactsDir: string; onStep?: (step: number) => void }): Promise<JobOutcome>;
  stop(jobId: string, why: StopReason): void;
  /** Resolves when the host has exited, however. */
  exited: Promise<JobHostExit>;
  kill(): void;
};

export function startJobHost(options: { channel: WorkerChannel; backend: BackendPreference; log: (line: string) => void }): JobHost {
  // The host runs TypeScript through tsx's loader, whatever started this process (tsx's CLI, vitest, node --import).
  const child: ChildProcess = fork(path.join(here, "job-host.ts"), [], {
    cwd: root,
    execArgv: ["--import", pathToFileURL(path.join(root, "node_modules", "tsx", "dist", "loader.mjs")).href, ...rolloutProcessFlags()],
    serialization: "advanced",
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  const send = (message: WorkerMessage) => {
    if (child.connected) child.send(message);
  };
  const jobs = new Map<string, { resolve: (outcome: JobOutcome) => void; reject: (error: Error) => void; onStep?: (step: number) => void }>();
  let resolveReady!: (value: { backend: string; gpu: boolean }) => void;
  let rejectReady!: (error: Error) => void;
  const ready = new Promise<{ backend: string; gpu: boolean }>((resolve, reject) => {
    resolveReady = resolve;
    rejectReady = reject;
  });
  ready.catch(() => {}); // the caller sees it; an exit after start-up must not also be an unhandled rejection
  const exited = new Promise<JobHostExit>((resolve) => {
    child.once("exit", (code, signal) => {
      const exit = new JobHostExit(code, signal);
      rejectReady(exit);
      for (const job of jobs.values()) job.reject(exit);
      jobs.clear();
      resolve(exit);
    });
  });

  child.on("message", (message: HostMessage) => {
    switch (message.type) {
      case "ready":
        resolveReady({ backend: message.backend, gpu: message.gpu });
        break;
      case "step":
        jobs.get(message.jobId)?.onStep?.(message.step);
        break;
      case "done": {
        const job = jobs.get(message.jobId);
        if (!job) break;
        jobs.delete(message.jobId);
        if (message.error) job.reject(revivedError(message.error));
        else job.resolve(message.outcome!);
        break;
      }
      case "call": {
        if (!(hostCalls as readonly string[]).includes(message.method)) {
          send({ type: "result", id: message.id, error: { message: `the job host asked for '${message.method}', which a job may not call` } });
          break;
        }
        const operation = options.channel[message.method] as (input: unknown) => Promise<unknown>;
        operation.call(options.channel, message.input).then(
          (value) => send({ type: "result", id: message.id, value }),
          (error: unknown) => send({ type: "result", id: message.id, error: crossedError(error) }),
        );
        break;
      }
    }
  });
  send({ type: "init", backend: options.backend });

  return {
    pid: child.pid!,
    ready,
    exited,
    run: ({ onStep, ...start }) =>
      new Promise<JobOutcome>((resolve, reject) => {
        if (child.exitCode !== null || child.signalCode !== null) return reject(new JobHostExit(child.exitCode, child.signalCode));
        jobs.set(start.jobId, { resolve, reject, onStep });
        send({ type: "start", ...start });
      }),
    stop: (jobId, why) => send({ type: "stop", jobId, why }),
    kill: () => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    },
  };
}

/**
 * Which host a job computes in: LoRA jobs on one base share a host, and so the base's weights in memory, as the
 * scheduler counted them (a footprint's `sharedBase`); every other job has a host of its own. Jobs in one host take
 * turns between their awaits, a step or an evaluation's thousands of episodes at a time; jobs in different hosts
 * share the cores as the system shares them among processes, so each gets its share on a busy machine.
 */
export function hostKey(jobId: string, spec: JobSpec): string {
  if (spec.job.mode !== "lora") return `job:${jobId}`;
  const base = spec.base;
  return `base:${base ? (base.kind === "builtin" ? base.name : base.id) : spec.run.config.agent.base}`;
}

/**
 * A worker's job hosts by key (`hostKey`): the first, started at registration (its backend says what the worker
 * offers), takes the first key asked for; other keys get hosts of their own, started when a job needs one and
 * stopped when their last job ends. The first stays, to be taken by the next key once its jobs end. A host that
 * exits unasked is reported to `onExit`: the worker hands back all its jobs and starts anew.
 */
export class JobHosts {
  readonly first: JobHost;
  private readonly byKey = new Map<string, { host: Promise<JobHost>; jobs: number }>();
  private firstKey: string | null = null;
  private readonly retired = new Set<JobHost>();
  private readonly all = new Set<JobHost>();
  private exitListener: ((exit: JobHostExit) => void) | null = null;

  constructor(private readonly startHost: () => JobHost) {
    this.first = this.started();
  }

  private started(): JobHost {
    const host = this.startHost();
    this.all.add(host);
    void host.exited.then((exit) => {
      this.all.delete(host);
      if (!this.retired.has(host)) this.exitListener?.(exit);
    });
    return host;
  }

  onExit(listener: (exit: JobHostExit) => void): void {
    this.exitListener = listener;
  }

  /** The host for `key`, started if need be; counts a job in it until `release`. */
  async take(key: string): Promise<JobHost> {
    let entry = this.byKey.get(key);
    if (!entry) {
      if (this.firstKey === null) {
        this.firstKey = key;
        entry = { host: Promise.resolve(this.first), jobs: 0 };
      } else {
        const host = this.started();
        entry = { host: host.ready.then(() => host), jobs: 0 };
      }
      this.byKey.set(key, entry);
    }
    entry.jobs++;
    return entry.host;
  }

  release(key: string): void {
    const entry = this.byKey.get(key);
    if (!entry || --entry.jobs > 0) return;
    this.byKey.delete(key);
    if (key === this.firstKey) {
      this.firstKey = null;
      return;
    }
    void entry.host.then(
      (host) => {
        this.retired.add(host);
        host.kill();
      },
      () => {},
    );
  }

  killAll(): void {
    for (const host of this.all) {
      this.retired.add(host);
      host.kill();
    }
  }
}
