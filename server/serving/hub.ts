/**
 * The web server's side of serving: which inference jobs are live (they exchange with it), the requests waiting to
 * be handed to them, and the clients waiting on their tokens. All in memory: a request and its tokens never touch
 * the database. A job's worker holds one exchange at a time (server/serving/protocol.ts); a request for it wakes
 * its waiting exchange at once, and the tokens its steps made reach their clients as the exchange arrives.
 */
import type { ExchangeAnswer, ExchangeInput, ServeEvent, ServeRequest, ServingHello } from "./protocol";

/** A job that has not exchanged for this long is taken for gone: its requests fail, and the next one starts it again. */
export const STALE_MS = 15_000;

type Live = {
  jobId: string;
  workerId: string;
  hello: ServingHello;
  lastSeen: number;
  /** Requests not yet handed over, and ids of handed ones whose clients left. */
  pending: ServeRequest[];
  cancelled: string[];
  wake: (() => void) | null;
  load: ExchangeInput["load"];
};

type Waiting = { jobId: string; delivered: boolean; listener: (event: ServeEvent) => void };

/** What a caller is told about a live serving job (the status route, tests). */
export type LiveServer = { jobId: string; runId: string; projectId: string; base: string; contextLength: number; rowsPerModel: number } & ExchangeInput["load"];

export class ServingHub {
  private readonly live = new Map<string, Live>();
  private readonly waiting = new Map<string, Waiting>();
  private readonly sweeper: NodeJS.Timeout;

  constructor() {
    this.sweeper = setInterval(() => this.sweep(), 2_000);
    this.sweeper.unref();
  }

  close(): void {
    clearInterval(this.sweeper);
    for (const live of this.live.values()) this.drop(live, "the web server is shutting down");
  }

  /** Whether a job has exchanged here (its first exchange is checked against the database). */
  knows(jobId: string, workerId: string): boolean {
    return this.live.get(jobId)?.workerId === workerId;
  }

  /** The live job serving a project's base, if one exchanged lately. */
  serverFor(projectId: string, base: string): LiveServer | null {
    for (const live of this.live.values()) {
      if (live.hello.projectId === projectId && live.hello.base === base && Date.now() - live.lastSeen < STALE_MS) return this.describe(live);
    }
    return null;
  }

  servers(): LiveServer[] {
    return [...this.live.values()].map((live) => this.describe(live));
  }

  private describe(live: Live): LiveServer {
    const { runId, projectId, base, contextLength, rowsPerModel } = live.hello;
    return { jobId: live.jobId, runId, projectId, base, contextLength, rowsPerModel, ...live.load };
  }

  /**
   * Hands a request to a live job: `listener` hears its events until `finish` is called. `cancel` (its client left)
   * takes it back, or tells the job to free its rows at its next step.
   */
  submit(jobId: string, request: ServeRequest, listener: (event: ServeEvent) => void): { cancel(): void; finish(): void } {
    const live = this.live.get(jobId);
    if (!live) {
      queueMicrotask(() => listener(stopped(request.id, "its serving job ended just now; retry")));
      return { cancel() {}, finish() {} };
    }
    this.waiting.set(request.id, { jobId, delivered: false, listener });
    live.pending.push(request);
    this.wakeUp(live);
    return {
      cancel: () => {
        const waiting = this.waiting.get(request.id);
        if (!waiting) return;
        this.waiting.delete(request.id);
        const holder = this.live.get(waiting.jobId);
        if (!holder) return;
        if (waiting.delivered) {
          holder.cancelled.push(request.id);
          this.wakeUp(holder);
        } else holder.pending = holder.pending.filter((r) => r.id !== request.id);
      },
      finish: () => {
        this.waiting.delete(request.id);
      },
    };
  }

  /** A worker's exchange: its events go to their clients; it gets the requests and cancellations waiting for it. */
  async exchange(input: ExchangeInput): Promise<ExchangeAnswer> {
    let live = this.live.get(input.jobId);
    if (!live) {
      live = {
        jobId: input.jobId,
        workerId: input.workerId,
        hello: input.hello,
        lastSeen: Date.now(),
        pending: [],
        cancelled: [],
        wake: null,
        load: input.load,
      };
      this.live.set(input.jobId, live);
    }
    live.lastSeen = Date.now();
    live.load = input.load;
    for (const event of input.events) this.waiting.get(event.id)?.listener(event);
    if (input.closing) {
      this.drop(live, "its serving job ended just now; retry");
      return { requests: [], cancelled: [] };
    }
    if (live.pending.length === 0 && live.cancelled.length === 0 && input.waitMs > 0) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, input.waitMs);
        function done() {
          clearTimeout(timer);
          if (live!.wake === done) live!.wake = null;
          resolve();
        }
        live!.wake = done;
      });
      live.lastSeen = Date.now();
    }
    const requests = live.pending.splice(0);
    for (const request of requests) {
      const waiting = this.waiting.get(request.id);
      if (waiting) waiting.delivered = true;
    }
    return { requests, cancelled: live.cancelled.splice(0) };
  }

  private wakeUp(live: Live): void {
    live.wake?.();
  }

  /** Forgets a job, failing the requests it held (they may be sent again: the next starts a job). */
  private drop(live: Live, why: string): void {
    this.live.delete(live.jobId);
    live.wake?.();
    for (const [id, waiting] of this.waiting) {
      if (waiting.jobId !== live.jobId) continue;
      this.waiting.delete(id);
      waiting.listener(stopped(id, why));
    }
  }

  private sweep(): void {
    for (const live of this.live.values()) {
      if (Date.now() - live.lastSeen > STALE_MS) this.drop(live, `its serving job's worker has not been heard from for ${STALE_MS / 1000} s`);
    }
  }
}

function stopped(id: string, why: string): ServeEvent {
  return { id, type: "error", status: 503, message: `The model's server stopped: ${why}.`, param: null, code: "server_stopped" };
}
