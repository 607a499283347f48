/**
 * `tinkerlab/client`: a typed client of a Tinkerlab server for scripts and the CLI (bin/tinkerlab.ts). It speaks
 * the server's own tRPC API over HTTP, authenticated with an API key (Settings → API keys, sent as
 * `Authorization: Bearer tl_…`; a local server needs none), so every type is the server's.
 *
 *   const tl = createClient({ url: "http://localhost:3000", apiKey: process.env.TINKERLAB_API_KEY });
 *   const { id } = await tl.experiments.create({ name: "mine", files, config });
 *   const { runId } = await tl.runs.launch(id);
 *   for await (const update of tl.runs.follow(runId)) console.log(update.run.step, update.latest["reward/mean"]);
 *
 * `tl.api` is the raw tRPC client, for every procedure the wrappers here do not name.
 */
import { createTRPCClient, httpLink, TRPCClientError } from "@trpc/client";
import type { inferRouterInputs, inferRouterOutputs } from "@trpc/server";
import superjson from "superjson";
// Relative, not "@/…": a script or the CLI may run this from any folder, where the project's path aliases do not hold.
import { type RunState, terminalRunStates } from "../lifecycle";
import type { Tokenizer } from "../model/tokenizer";
import { tokenizerFromSpec } from "../model/tokenizer-spec";
import type { LossName, SampledSequence, SampleOptions, TrainingBatch, TrainingPrimitives } from "@/lib/rl/primitives";
import type { SessionCallArgs, SessionMethod } from "@/lib/rl/session-calls";
import type { AppRouter } from "@/server/api";

export type RouterInputs = inferRouterInputs<AppRouter>;
export type RouterOutputs = inferRouterOutputs<AppRouter>;
export type Run = RouterOutputs["runs"]["byId"];
export type RunSummary = RouterOutputs["runs"]["list"]["items"][number];
export type MetricPoint = RouterOutputs["runs"]["metrics"]["points"][number];
export type ExperimentFiles = NonNullable<RouterInputs["experiments"]["create"]["files"]>;
export type ExperimentConfigInput = NonNullable<RouterInputs["experiments"]["create"]["config"]>;

/** Whether a run's state no longer changes (completed, failed, cancelled: lib/lifecycle's terminal states). */
export const isFinished = (status: string) => terminalRunStates.has(status as RunState);

export interface ClientOptions {
  /** the server, e.g. http://localhost:3000 */
  url: string;
  /** an API key (tl_…); a local server (TINKERLAB_AUTH=local) needs none */
  apiKey?: string;
  /** the fetch to use (default: the global one) */
  fetch?: typeof fetch;
}

/** What the server answered when it refused a call: its message, and its code (NOT_FOUND, BAD_REQUEST, UNAUTHORIZED, …). */
export class TinkerlabError extends Error {
  constructor(
    message: string,
    readonly code: string,
    readonly status: number | null,
  ) {
    super(message);
    this.name = "TinkerlabError";
  }
}

/** One step's stored rollouts of a followed run (`runs.followRollouts`): its episodes, group by group. */
export type RolloutStep = { step: number; split: "train" | "eval"; items: RouterOutputs["runs"]["rollouts"]["items"] };

/** One look at a followed run: the run, the metric points reported since the last look, and each metric's latest value. */
export interface RunUpdate {
  run: Run;
  points: MetricPoint[];
  latest: Record<string, number>;
}

export function createClient(options: ClientOptions) {
  const base = options.url.replace(/\/+$/, "");
  if (!/^https?:\/\//.test(base)) throw new TypeError(`url must start with http:// or https://; got '${options.url}'`);
  const headers: Record<string, string> = options.apiKey ? { authorization: `Bearer ${options.apiKey}` } : {};
  const doFetch = options.fetch ?? fetch;
  const api = createTRPCClient<AppRouter>({
    links: [httpLink({ url: `${base}/api/trpc`, transformer: superjson, headers, fetch: doFetch })],
  });

  /** Runs a call; a refusal becomes a TinkerlabError with the server's own message. */
  const call = async <T>(what: () => Promise<T>): Promise<T> => {
    try {
      return await what();
    } catch (error) {
      throw asTinkerlabError(error, base);
    }
  };

  /**
   * A write that creates something (an experiment, a run, a dataset, a session, a base), sent with one idempotency
   * key (the caller's, else a new one) and sent again with the same key while the connection fails, the server is
   * unavailable, or it is still working on the first try (409): the server does it once and answers every try
   * with the first answer.
   */
  const write = async <T>(idempotencyKey: string | undefined, send: (idempotencyKey: string) => Promise<T>): Promise<T> => {
    const key = idempotencyKey ?? randomId();
    for (let attempt = 1; ; attempt++) {
      try {
        return await call(() => send(key));
      } catch (error) {
        if (!(error instanceof TinkerlabError && retriesWrite(error)) || attempt >= WRITE_TRIES) throw error;
        await sleep(Math.min(5_000, 250 * 2 ** (attempt - 1)));
      }
    }
  };

  /**
   * GET of one of the server's files (a run's rollouts as JSONL, a model as ONNX), with the key. An answer of another
   * type than `expected` (a sign-in page's HTML where JSON Lines were asked for) is refused, never saved as the file.
   */
  const download = async (path: string, expected: keyof typeof DOWNLOAD_TYPES): Promise<Response> => {
    const response = await send("GET", path);
    const type = response.headers.get("content-type") ?? "none";
    if (!DOWNLOAD_TYPES[expected].test(type)) {
      await response.body?.cancel();
      throw new TinkerlabError(
        `GET ${path} answered ${type} where ${expected} was expected: is ${base} a Tinkerlab server, and its URL the server's root?`,
        "WRONG_CONTENT",
        response.status,
      );
    }
    return response;
  };

  /**
   * A request to one of the server's routes outside tRPC, with the key; a refusal becomes a TinkerlabError. Redirects
   * are not followed: the server's own routes never redirect, and one that does leads to a page (a sign-in page) that
   * a script would mistake for its answer.
   */
  const send = async (method: string, path: string, init: { body?: BodyInit; headers?: Record<string, string> } = {}): Promise<Response> => {
    let response: Response;
    try {
      const streamed = init.body instanceof ReadableStream;
      response = await doFetch(`${base}${path}`, {
        method,
        headers: { ...headers, ...init.headers },
        body: init.body,
        redirect: "manual",
        ...(streamed ? { duplex: "half" } : {}),
      } as RequestInit);
    } catch (error) {
      throw new TinkerlabError(`cannot reach ${base}: ${(error as Error).message}`, "UNREACHABLE", null);
    }
    // A browser's fetch hides a redirect's status and target ("opaqueredirect", status 0).
    if (response.type === "opaqueredirect" || (response.status >= 300 && response.status < 400)) {
      await response.body?.cancel();
      const to = response.headers.get("location");
      throw new TinkerlabError(
        `${method} ${path} answered ${response.status || "a redirect"}${to ? ` to ${to}` : ""} instead of an answer (a page, such as sign-in): ${
          headers.authorization
            ? `is ${base} a Tinkerlab server at its root, and up to date?`
            : "the server needs an API key (Authorization: Bearer tl_…; the CLI's --key or TINKERLAB_API_KEY)"
        }`,
        "FORBIDDEN",
        response.status || null,
      );
    }
    if (!response.ok) {
      const text = await response.text();
      let message = text;
      try {
        message = (JSON.parse(text) as { error?: string }).error ?? text;
      } catch {}
      const code = response.status === 404 ? "NOT_FOUND" : response.status === 401 || response.status === 403 ? "FORBIDDEN" : "HTTP_ERROR";
      throw new TinkerlabError(`${method} ${path} answered ${response.status}: ${message}`, code, response.status);
    }
    return response;
  };

  const experiments = {
    list: (limit = 50) => call(() => api.experiments.list.query({ limit })),
    get: (id: string) => call(() => api.experiments.byId.query({ id })),
    version: (id: string, version: number) => call(() => api.experiments.version.query({ id, version })),
    /** Creates an experiment; once, however often the request is sent (`idempotencyKey`: your own key for it, e.g. to retry after a restart). */
    create: (input: RouterInputs["experiments"]["create"]) =>
      write(input.idempotencyKey, (idempotencyKey) => api.experiments.create.mutate({ ...input, idempotencyKey })),
    /** Saves files and config as the experiment's next version. */
    save: (id: string, input: { files: ExperimentFiles; config: ExperimentConfigInput; message?: string }) =>
      call(() => api.experiments.save.mutate({ id, files: input.files, config: input.config, message: input.message })),
    /**
     * Compiles source files and plays a few episodes of them in the sandbox (with the experiment's project's
     * datasets): diagnostics with file, line and column, without saving or launching anything.
     */
    validate: (id: string, files: ExperimentFiles, options: Omit<RouterInputs["experiments"]["validate"], "experimentId" | "files"> = {}) =>
      call(() => api.experiments.validate.mutate({ experimentId: id, files, ...options })),
  };

  const runs = {
    list: (filter: RouterInputs["runs"]["list"] = { limit: 50 }) => call(() => api.runs.list.query(filter)),
    get: (id: string) => call(() => api.runs.byId.query({ id })),
    /**
     * Launches a run of the experiment's latest version, with its validation's warnings. Refused (BAD_REQUEST) when
     * the editor would refuse it: the first line of the message says why, each next line is one problem.
     */
    launch: (experimentId: string, options: { priority?: number; idempotencyKey?: string } = {}) =>
      write(options.idempotencyKey, (idempotencyKey) => api.runs.launch.mutate({ experimentId, ...options, idempotencyKey })),
    /** Evaluates a checkpoint on its run's held-out episodes: a run of its own (its id), whose score is `eval/*`. */
    evaluate: (checkpointId: string, options: Omit<RouterInputs["runs"]["evaluate"], "checkpointId"> = {}) =>
      write(options.idempotencyKey, (idempotencyKey) => api.runs.evaluate.mutate({ checkpointId, ...options, idempotencyKey })),
    /** Exports a checkpoint as one safetensors file: a run of its own (its id), whose checkpoints list the file. */
    exportCheckpoint: (checkpointId: string, options: { idempotencyKey?: string } = {}) =>
      write(options.idempotencyKey, (idempotencyKey) => api.runs.export.mutate({ checkpointId, idempotencyKey })),
    /**
     * One project's runs as the workbench's runs table shows them: columns (`metric:max:reward/mean`,
     * `config:algorithm.learningRate`, …), sort, filters, groups, a page. Without `projectId`, the caller's first
     * project.
     */
    table: (input: Omit<RouterInputs["runs"]["table"], "projectId"> & { projectId?: string }) =>
      call(async () => api.runs.table.query({ ...input, projectId: input.projectId ?? (await api.projects.list.query())[0]?.id ?? "" })),
    tag: (id: string, change: { add?: string[]; remove?: string[] }) => call(() => api.runs.tag.mutate({ id, ...change })),
    rename: (id: string, name: string) => call(() => api.runs.rename.mutate({ id, name })),
    /** Archives the run (the runs table hides it unless asked), or with `archived: false` brings it back. */
    archive: (id: string, archived = true) => call(() => api.runs.archive.mutate({ id, archived })),
    /** Deletes the run and all it recorded; `confirmName` must repeat its name. Refused while something depends on it. */
    delete: (id: string, confirmName: string) => call(() => api.runs.delete.mutate({ id, confirmName })),
    cancel: (id: string) => call(() => api.runs.control.mutate({ id, action: "cancel" })),
    pause: (id: string) => call(() => api.runs.control.mutate({ id, action: "pause" })),
    resume: (id: string) => call(() => api.runs.control.mutate({ id, action: "resume" })),
    /** Log lines after `afterSeq` (0: from the start), at most 1,000 a call. */
    logs: (runId: string, afterSeq = 0) => call(() => api.runs.logs.query({ runId, afterSeq })),
    /** Metric points after `afterSeq` (0: from the start). */
    metrics: (runId: string, afterSeq = 0) => call(() => api.runs.metrics.query({ runId, afterSeq })),
    rollouts: (runId: string, options: { split?: "train" | "eval"; step?: number } = {}) => call(() => api.runs.rollouts.query({ runId, ...options })),
    checkpoints: (runId: string) => call(() => api.checkpoints.ofRun.query({ runId })),
    /**
     * The run's stored rollouts as JSON Lines, one sample a line with its split and step: every one (training and
     * evaluation, every step) unless `split` or `step` narrows it. As a stream (a run's rollouts may not fit in memory).
     */
    rolloutsJsonlStream: async (runId: string, options: { split?: "train" | "eval"; step?: number } = {}): Promise<ReadableStream<Uint8Array>> => {
      const query = new URLSearchParams();
      if (options.split) query.set("split", options.split);
      if (options.step !== undefined) query.set("step", String(options.step));
      const narrowed = query.toString();
      const response = await download(`/runs/${encodeURIComponent(runId)}/rollouts.jsonl${narrowed ? `?${narrowed}` : ""}`, "JSON Lines");
      return response.body ?? new ReadableStream({ start: (controller) => controller.close() });
    },
    /** The same as one string: for a small run or one step. */
    rolloutsJsonl: async (runId: string, options: { split?: "train" | "eval"; step?: number } = {}) =>
      new Response(await runs.rolloutsJsonlStream(runId, options)).text(),

    /**
     * Follows a run until it finishes: one update a look, every `intervalMs`, with the metric points reported
     * since the last one. Ends after the update that shows the run completed, failed or cancelled.
     */
    follow: async function* (runId: string, options: { intervalMs?: number; signal?: AbortSignal } = {}): AsyncGenerator<RunUpdate> {
      const interval = options.intervalMs ?? 1000;
      let afterSeq = 0;
      const latest: Record<string, number> = {};
      for (;;) {
        const run = await runs.get(runId);
        const points: MetricPoint[] = [];
        for (;;) {
          const page = await runs.metrics(runId, afterSeq);
          points.push(...page.points);
          if (page.points.length === 0 || page.lastSeq === afterSeq) break;
          afterSeq = page.lastSeq;
        }
        for (const point of points) latest[point.name] = point.value;
        yield { run, points, latest: { ...latest } };
        if (isFinished(run.status) || options.signal?.aborted) return;
        await sleep(interval, options.signal);
      }
    },

    /**
     * Follows a run's rollouts (of `split`, default "train") until it finishes: each step's episodes once, in step
     * order, as they are stored, from the first step kept (or after `afterStep`); looks every `intervalMs`.
     */
    followRollouts: async function* (
      runId: string,
      options: { split?: "train" | "eval"; afterStep?: number; intervalMs?: number; signal?: AbortSignal } = {},
    ): AsyncGenerator<RolloutStep> {
      const split = options.split ?? "train";
      const interval = options.intervalMs ?? 1000;
      /** The next step to look at: its rollouts, or (none stored) the first step after it that has some. */
      let step = options.afterStep === undefined ? 0 : options.afterStep + 1;
      for (;;) {
        // Whether the run had ended before this look: then what it stored is all there is.
        const finished = isFinished((await runs.get(runId)).status);
        for (;;) {
          const page = await runs.rollouts(runId, { split, step });
          if (page.items.length > 0) {
            yield { step, split, items: page.items };
            step += 1;
          } else if (page.nextStep !== null) step = page.nextStep;
          else break;
          if (options.signal?.aborted) return;
        }
        if (finished || options.signal?.aborted) return;
        await sleep(interval, options.signal);
      }
    },

    /** Waits for a run to finish; returns it as it ended. */
    wait: async (runId: string, options: { intervalMs?: number; signal?: AbortSignal } = {}): Promise<Run> => {
      let last: Run | null = null;
      for await (const update of runs.follow(runId, options)) last = update.run;
      return last!;
    },
  };

  /**
   * Opens a remote training session on a base (a built-in base or a checkpoint): the model and its optimizer live
   * on a worker, placed by the scheduler like any job, and the session's primitives run there. Resolves once the
   * session is open (its calls wait for its place); `close()` saves and ends it.
   */
  const createTrainingClient = async (options: RouterInputs["sessions"]["create"]) => {
    const opened = await write(options.idempotencyKey, (idempotencyKey) => api.sessions.create.mutate({ ...options, idempotencyKey }));
    const tokenizer = tokenizerFromSpec(opened.tokenizer, `session ${opened.sessionId}'s base '${options.base}'`);
    return new RemoteTrainingSession(api, opened.sessionId, opened.contextLength, tokenizer, (what) => call(what));
  };
  const training = { create: createTrainingClient };

  const models = {
    /** The bases a run may start from: built-in and imported bases, and the caller's runs' checkpoints. */
    bases: () => call(() => api.checkpoints.bases.query({ limit: 200 })),
    /** The checkpoints of the caller's projects' runs, every kind, newest first, with their run. */
    checkpoints: (limit = 200) => call(() => api.checkpoints.list.query({ limit })),
    /**
     * Uploads a Hugging Face model folder's files (config.json, safetensors, tokenizer files) and imports them as
     * the base `name`, for the server's admin. Each file streams from `open(file)`; `onFile` hears each one sent.
     */
    importFolder: async (
      name: string,
      files: { name: string; bytes: number; open: () => ReadableStream<Uint8Array> }[],
      options: { contextLength?: number; replace?: boolean; idempotencyKey?: string; onFile?: (file: string, bytes: number) => void } = {},
    ) => {
      for (const file of files) {
        const path = `/api/bases/${encodeURIComponent(name)}/files/${encodeURIComponent(file.name)}`;
        await send("PUT", path, { body: file.open(), headers: { "content-type": "application/octet-stream", "content-length": String(file.bytes) } });
        options.onFile?.(file.name, file.bytes);
      }
      const response = await write(options.idempotencyKey, (idempotencyKey) =>
        send("POST", `/api/bases/${encodeURIComponent(name)}/import`, {
          body: JSON.stringify({ contextLength: options.contextLength, replace: options.replace }),
          headers: { "content-type": "application/json", "idempotency-key": idempotencyKey },
        }),
      );
      return (await response.json()) as { name: string; source: string; modelType: string; parameters: number; config: Record<string, unknown> };
    },
    /** A base's or checkpoint's model as an ONNX file's bytes (exported by the server on first use). */
    onnx: async (name: string) => new Uint8Array(await (await download(`/api/models/${encodeURIComponent(name)}.onnx`, "a model file")).arrayBuffer()),
  };

  const datasets = {
    list: () => call(() => api.datasets.list.query()),
    /** Uploads a dataset (JSONL or CSV text), split into train and test rows; once, however often the request is sent. */
    upload: (input: RouterInputs["datasets"]["upload"]) =>
      write(input.idempotencyKey, (idempotencyKey) => api.datasets.upload.mutate({ ...input, idempotencyKey })),
    /** Renames a dataset; the answer's `stillNamedBy` lists the experiments that still name its old name. */
    rename: (id: string, name: string) => call(() => api.datasets.rename.mutate({ id, name })),
    /** Deletes a dataset and its file; refused while an experiment's latest version or an unended run names it. */
    delete: (id: string) => call(() => api.datasets.delete.mutate({ id })),
  };

  return { url: base, api, experiments, runs, datasets, createTrainingClient, training, models };
}

export type TinkerlabClient = ReturnType<typeof createClient>;

type CallAnswer = RouterOutputs["sessions"]["invokeMany"]["answers"][number];

/** Tries of a write (`write`) before its failure is the caller's: about 8 s of waiting between them in all. */
const WRITE_TRIES = 6;

/** What each kind of download answers with: anything else (HTML, JSON) is not the file. */
const DOWNLOAD_TYPES = {
  "JSON Lines": /^application\/(x-ndjson|jsonl)\b/i,
  "a model file": /^application\/octet-stream\b/i,
} as const;

/**
 * Whether a write's failure may be sent again with its key: the connection failed, the server (or a proxy) could
 * not answer, or another try with the key is still being worked on (409). Anything else is the server's answer.
 */
const retriesWrite = (error: TinkerlabError) =>
  error.code === "UNREACHABLE" || error.code === "CONFLICT" || error.status === 409 || error.status === 502 || error.status === 503 || error.status === 504;

/** How long one request waits on the server for its calls' answers before asking again. */
const ANSWER_WAIT_MS = 20_000;
/** Tries of one request when the connection fails: the same call ids each time, so each call runs once. */
const SEND_TRIES = 8;
/** The most calls one request carries (the server's MAX_CALLS_PER_REQUEST). */
const CALLS_PER_REQUEST = 64;
/**
 * The most JSON of calls' arguments one request carries when it carries several: half the 16 MiB the server
 * accepts in one request, which leaves room for the envelope and escapes. A call larger than this goes alone (and
 * one over the server's limit is refused with a 413 that says how to split it).
 */
const REQUEST_JSON_BUDGET = 8 * 1024 * 1024;

/**
 * The most requests of one session out at once. A request does not wait for the one before it to return: it names
 * that one's last call (`after`) and the server submits its calls behind it, so the worker runs every call in the
 * order it was made while the next request is already on its way.
 */
const REQUESTS_IN_FLIGHT = 8;

/** A request sent and not yet settled: its calls, the call it follows, and its attempt now out (to abort). */
type OutgoingRequest = { calls: QueuedCall[]; after: string | null; attempt: AbortController | null };

/** A call made and not yet answered, its arguments as the JSON text sent. */
type QueuedCall = {
  callId: string;
  method: SessionMethod;
  argsJson: string;
  resolve(result: unknown): void;
  reject(error: unknown): void;
};

/**
 * A remote training session: the training primitives (lib/rl/primitives.ts) of a model on a worker, with the same
 * types and results as the in-process TrainingClient, so `trainRl` and a script's own loop run on it unchanged.
 * Every call returns at once a promise of its answer, so a loop can make several calls before awaiting them (a
 * step's forward-backward chunks and its optimizer step; the next sample while the last batch trains): the calls
 * run on the worker one at a time, in the order they were made. Calls made together (before the client next
 * yields) travel in one request (`sessions.invokeMany`) that returns when the last has run; its worker takes them
 * together and runs them back to back. Calls made later go in a request of their own at once, without waiting for
 * the requests before to return (up to REQUESTS_IN_FLIGHT): each names the last call of the one before (`after`),
 * and the server submits its calls behind that one. Each call has its own id; a request lost with its connection
 * is sent again with those ids, and the server answers each from its one run.
 */
export class RemoteTrainingSession implements TrainingPrimitives {
  /** Calls made and not yet sent. */
  private readonly queue: QueuedCall[] = [];
  /** Requests sent and not yet settled, in the order sent. */
  private readonly outgoing: OutgoingRequest[] = [];
  private pumpQueued = false;
  /** The last call of the last request sent (and not refused): what the next request follows. */
  private tail: string | null = null;
  /** True: calls made while earlier ones are out cost no wait for them (trainRl then starts a step's rollouts early). */
  readonly overlapsCalls = true;

  constructor(
    private readonly api: ReturnType<typeof createTRPCClient<AppRouter>>,
    /** the session's run id: its page is /runs/<id> */
    readonly sessionId: string,
    readonly contextLength: number,
    /** the base's tokenizer: the project's byte tokenizer, or an imported model's own with its chat template */
    readonly tokenizer: Tokenizer,
    private readonly guard: <T>(what: () => Promise<T>) => Promise<T>,
  ) {}

  forward(batch: TrainingBatch, options: { temperature?: number } = {}) {
    return this.call<{ logprobs: number[][]; values?: number[][] }>("forward", { batch, options });
  }

  forwardBackward(batch: TrainingBatch, loss: LossName, config?: Parameters<TrainingPrimitives["forwardBackward"]>[2]) {
    return this.call<{ loss: number; metrics: Record<string, number> }>("forwardBackward", { batch, loss, config });
  }

  optimStep(params: { lr: number; weightDecay?: number; gradClip?: number }) {
    return this.call<{ gradNorm: number; step: number }>("optimStep", { params });
  }

  sample(prompts: number[][], n: number, params?: SampleOptions) {
    return this.call<{ samples: SampledSequence[][] }>("sample", { prompts, n, params });
  }

  /** Saves the session's model, optimizer and step as a checkpoint of its run (a base for later runs). */
  saveState() {
    return this.call<{ step: number; checkpointId: string | null }>("saveState", {});
  }

  /**
   * Saves the session's weights (its LoRA adapter, or every weight) alone, without the optimizer, as a checkpoint of
   * its run: its id is a base for sampling in the playground, an export, or a later run. `saveState` also resumes.
   */
  saveWeightsForSampler() {
    return this.call<{ step: number; checkpointId: string | null }>("saveWeightsForSampler", {});
  }

  /**
   * Loads a checkpoint into the session: a state (weights or adapter, optimizer moments, step, RNG: training goes on
   * exactly from there) or weights for a sampler (the optimizer starts afresh). Any checkpoint of a run you can see,
   * of the session's shape and mode; an adapter must have been trained on the session's base.
   */
  loadState(checkpointId: string) {
    return this.call<{ step: number }>("loadState", { checkpointId });
  }

  /** Saves the session and ends it, freeing its place. */
  close() {
    return this.call<{ step: number; checkpointId: string | null }>("close", {});
  }

  private call<T, M extends SessionMethod = SessionMethod>(method: M, args: SessionCallArgs[M]): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.queue.push({ callId: randomId(), method, argsJson: JSON.stringify(args), resolve: resolve as (result: unknown) => void, reject });
      if (this.pumpQueued) return;
      this.pumpQueued = true;
      // After the caller's synchronous code, so that the calls it makes together leave in one request.
      queueMicrotask(() => {
        this.pumpQueued = false;
        this.pump();
      });
    });
  }

  /** Sends the queued calls as requests, while fewer than REQUESTS_IN_FLIGHT are out; each follows the one before. */
  private pump(): void {
    while (this.queue.length > 0 && this.outgoing.length < REQUESTS_IN_FLIGHT) {
      const request: OutgoingRequest = { calls: this.nextRequest(), after: this.tail, attempt: null };
      this.tail = request.calls.at(-1)!.callId;
      this.outgoing.push(request);
      void this.settle(request).finally(() => {
        this.outgoing.splice(this.outgoing.indexOf(request), 1);
        this.pump();
      });
    }
  }

  /**
   * A request refused (its calls rejected) may never have reached the session: the request that follows it now
   * follows the one it followed, and its attempt out (waiting on the server for the refused calls) is sent again.
   */
  private unlink(refused: OutgoingRequest): void {
    const last = refused.calls.at(-1)!.callId;
    for (const request of this.outgoing) {
      if (request === refused || request.after !== last) continue;
      request.after = refused.after;
      request.attempt?.abort();
    }
    if (this.tail === last) this.tail = refused.after;
  }

  /** The calls of the next request, in order: up to CALLS_PER_REQUEST, and REQUEST_JSON_BUDGET unless alone. */
  private nextRequest(): QueuedCall[] {
    let bytes = 0;
    let count = 0;
    while (count < this.queue.length && count < CALLS_PER_REQUEST) {
      bytes += this.queue[count]!.argsJson.length;
      if (count > 0 && bytes > REQUEST_JSON_BUDGET) break;
      count += 1;
    }
    return this.queue.splice(0, count);
  }

  /** Sends the request's calls until each is answered, settling each call's promise with its answer. */
  private async settle(request: OutgoingRequest): Promise<void> {
    let waiting = request.calls;
    try {
      while (waiting.length > 0) {
        const answers = await this.send(request, waiting);
        if (!answers) continue; // its predecessor was refused: sent again, following the one before that
        waiting = waiting.filter((call, i) => {
          const answer = answers[i];
          if (!answer || answer.state === "queued" || answer.state === "running") return true;
          if (answer.state === "failed") {
            call.reject(new TinkerlabError(`${call.method} failed on session ${this.sessionId}: ${answer.error}`, "CALL_FAILED", null));
          } else call.resolve(answer.resultJson === null ? null : JSON.parse(answer.resultJson));
          return false;
        });
      }
    } catch (error) {
      for (const call of waiting) call.reject(error);
      this.unlink(request);
    }
  }

  /** The calls' answers as they stand, or null when the attempt was aborted to follow another call (`unlink`). */
  private async send(request: OutgoingRequest, calls: QueuedCall[]): Promise<CallAnswer[] | null> {
    const sent = calls.map(({ callId, method, argsJson }) => ({ callId, method, argsJson }));
    for (let attempt = 1; ; attempt++) {
      const input = { sessionId: this.sessionId, calls: sent, waitMs: ANSWER_WAIT_MS, ...(request.after ? { after: request.after } : {}) };
      const controller = new AbortController();
      request.attempt = controller;
      try {
        return (await this.guard(() => this.api.sessions.invokeMany.mutate(input, { signal: controller.signal }))).answers;
      } catch (error) {
        if (controller.signal.aborted) return null;
        const lost = error instanceof TinkerlabError && (error.code === "UNREACHABLE" || error.status === 502 || error.status === 503 || error.status === 504);
        if (!lost || attempt >= SEND_TRIES) throw error;
        await sleep(Math.min(5_000, 250 * 2 ** (attempt - 1)));
      } finally {
        request.attempt = null;
      }
    }
  }
}

function randomId(): string {
  return globalThis.crypto.randomUUID();
}

function asTinkerlabError(error: unknown, base: string): TinkerlabError {
  if (error instanceof TRPCClientError) {
    const data = (error as TRPCClientError<AppRouter>).data as { code?: string; httpStatus?: number } | undefined;
    if (!data && /fetch failed|ECONNREFUSED|Failed to fetch/i.test(error.message)) {
      return new TinkerlabError(`cannot reach ${base}: is the server running? (${error.message})`, "UNREACHABLE", null);
    }
    return new TinkerlabError(error.message, data?.code ?? "ERROR", data?.httpStatus ?? null);
  }
  if (error instanceof TinkerlabError) return error;
  return new TinkerlabError(error instanceof Error ? error.message : String(error), "ERROR", null);
}

/** Waits `ms`, or until `signal` aborts; either way it leaves no listener on the signal (a follow sleeps on one per look). */
function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
  });
}
