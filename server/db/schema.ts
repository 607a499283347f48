import { relations, sql } from "drizzle-orm";
import { jobKinds, jobStates, runStates } from "@/lib/lifecycle";
import type { ApiKeyRole, ProjectRole } from "@/lib/lifecycle/roles";
import type { RunConfig } from "@/lib/lifecycle/run-config";
import type { ReportBlock } from "@/lib/reports/blocks";
import type { ExperimentConfig } from "@/lib/sdk/experiment";
import type { Footprint } from "../scheduler";
import { bigint, bigserial, boolean, doublePrecision, index, integer, jsonb, pgEnum, pgTable, text, timestamp, uniqueIndex } from "drizzle-orm/pg-core";

/*
 * One schema for the embedded PGlite database and for a PostgreSQL server. Ids are prefixed text (`run_…`) so a
 * log line or a URL says what it points at. Timestamps carry time zones.
 */

const createdAt = () => timestamp("created_at", { withTimezone: true }).notNull().defaultNow();

// ── people ───────────────────────────────────────────────────────────────────────────────────────────────────
export const users = pgTable("users", {
  id: text("id").primaryKey(),
  name: text("name").notNull(),
  email: text("email").notNull().unique(),
  emailVerified: boolean("email_verified").notNull().default(false),
  image: text("image"),
  /** "admin" (the first account of a team server) or "member". Sign-up cannot set it. */
  role: text("role").notNull().default("member"),
  createdAt: createdAt(),
  updatedAt: timestamp("updated_at", { withTimezone: true }).notNull().defaultNow(),
});

/*
 * Accounts and sessions of TINKERLAB_AUTH=team, as better-auth reads and writes them (server/auth/accounts.ts):
 * its drizzle adapter finds these tables by their export names and columns by their property names.
 */
export const sessions = pgTable(
  "sessions",
  {
    id: text("id").primaryKey(),
    userId: text("user_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    /** What the session cookie carries. */
    token: text("token").notNull().unique(),
    expiresAt: timestamp("expires_at", { withTimezone: true }).notNull(),
    ipAddress: text("ip_address"),
    userAgent: text("user_agent"),
    createdAt: createdAt(),
    updatedAt: timestamp("updated_at", { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [index("sessions_user_idx").on(t.userId)],
);

/** A way to sign in: for email and password, providerId "credential" and the password's scrypt hash. */
export const accounts = pgTable(
  "accounts",
  {
    id: text("id").primaryKey(),
    userId: text("user_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    accountId: text("account_id").notNull(),
    providerId: text("provider_id").notNull(),
    accessToken: text("access_token"),
    refreshToken: text("refresh_token"),
    idToken: text("id_token"),
    accessTokenExpiresAt: timestamp("access_token_expires_at", { withTimezone: true }),
    refreshTokenExpiresAt: timestamp("refresh_token_expires_at", { withTimezone: true }),
    scope: text("scope"),
    password: text("password"),
    createdAt: createdAt(),
    updatedAt: timestamp("updated_at", { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [index("accounts_user_idx").on(t.userId)],
);

export const verifications = pgTable(
  "verifications",
  {
    id: text("id").primaryKey(),
    identifier: text("identifier").notNull(),
    value: text("value").notNull(),
    expiresAt: timestamp("expires_at", { withTimezone: true }).notNull(),
    createdAt: createdAt(),
    updatedAt: timestamp("updated_at", { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [index("verifications_identifier_idx").on(t.identifier)],
);

/** Sign-in attempts per client address and path, shared by every process of the server. */
export const rateLimits = pgTable("rate_limits", {
  id: text("id").primaryKey(),
  key: text("key").notNull().unique(),
  count: integer("count").notNull(),
  /** Milliseconds since the epoch. */
  lastRequest: bigint("last_request", { mode: "number" }).notNull(),
});

/** Settings the server keeps for itself: the auth secret when none is configured, who became the first admin. */
export const serverSettings = pgTable("server_settings", {
  key: text("key").primaryKey(),
  value: text("value").notNull(),
  createdAt: createdAt(),
});

// ── projects ─────────────────────────────────────────────────────────────────────────────────────────────────
/** Roles in a project, weakest first: a viewer reads, an editor also creates and launches, an owner also manages people. */
export { type ApiKeyRole, apiKeyRoles, type ProjectRole, projectRoles } from "@/lib/lifecycle/roles";

/**
 * What experiments, runs, checkpoints and datasets belong to, and what people are members of. `prj_default` holds
 * what a server made before projects existed and the built-in examples; the local user and a team server's first
 * admin own it.
 */
export const projects = pgTable("projects", {
  id: text("id").primaryKey(),
  name: text("name").notNull(),
  createdBy: text("created_by")
    .notNull()
    .references(() => users.id),
  createdAt: createdAt(),
});

export const projectMembers = pgTable(
  "project_members",
  {
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    userId: text("user_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    role: text("role").notNull().$type<ProjectRole>(),
    createdAt: createdAt(),
  },
  (t) => [uniqueIndex("project_members_pair_uq").on(t.projectId, t.userId), index("project_members_user_idx").on(t.userId)],
);

/**
 * A link that makes whoever opens it (signing up first if need be) a member of a project with a role, until it
 * expires or is revoked. Only the SHA-256 of its token is stored.
 */
export const projectInvitations = pgTable(
  "project_invitations",
  {
    id: text("id").primaryKey(),
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    role: text("role").notNull().$type<ProjectRole>(),
    tokenHash: text("token_hash").notNull().unique(),
    createdBy: text("created_by")
      .notNull()
      .references(() => users.id),
    createdAt: createdAt(),
    expiresAt: timestamp("expires_at", { withTimezone: true }).notNull(),
    revokedAt: timestamp("revoked_at", { withTimezone: true }),
    /** How many people joined through it. */
    accepted: integer("accepted").notNull().default(0),
  },
  (t) => [index("project_invitations_project_idx").on(t.projectId)],
);

export const apiKeys = pgTable(
  "api_keys",
  {
    id: text("id").primaryKey(),
    userId: text("user_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    name: text("name").notNull(),
    /** The first characters of the key, shown in lists so a user can tell keys apart. */
    prefix: text("prefix").notNull(),
    /** SHA-256 of the whole key; the key itself is shown once and never stored. */
    hash: text("hash").notNull().unique(),
    /**
     * The one project the key acts in, and the most it may do there (never more than its maker's own role); "admin":
     * its project's owner, and the server's admin actions while its maker is the admin.
     */
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    role: text("role").notNull().$type<ApiKeyRole>(),
    expiresAt: timestamp("expires_at", { withTimezone: true }),
    createdAt: createdAt(),
    lastUsedAt: timestamp("last_used_at", { withTimezone: true }),
    revokedAt: timestamp("revoked_at", { withTimezone: true }),
  },
  (t) => [index("api_keys_user_idx").on(t.userId)],
);

// ── what users design ────────────────────────────────────────────────────────────────────────────────────────
export const experiments = pgTable(
  "experiments",
  {
    id: text("id").primaryKey(),
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    ownerId: text("owner_id")
      .notNull()
      .references(() => users.id),
    name: text("name").notNull(),
    description: text("description").notNull().default(""),
    /** The built-in template it was created from, if any. */
    template: text("template"),
    latestVersion: integer("latest_version").notNull().default(1),
    archived: boolean("archived").notNull().default(false),
    createdAt: createdAt(),
    updatedAt: timestamp("updated_at", { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [index("experiments_owner_idx").on(t.ownerId), index("experiments_updated_idx").on(t.updatedAt), index("experiments_project_idx").on(t.projectId)],
);

/** An immutable snapshot of an experiment's source files and config; every save adds one. */
export const experimentVersions = pgTable(
  "experiment_versions",
  {
    id: text("id").primaryKey(),
    experimentId: text("experiment_id")
      .notNull()
      .references(() => experiments.id, { onDelete: "cascade" }),
    version: integer("version").notNull(),
    /** Source files by path, e.g. {"environment.ts": "…"}. */
    files: jsonb("files").$type<Record<string, string>>().notNull(),
    /** Parsed at save (`parseExperiment`); a version saved before configs were checked may not parse: read it with `parseExperiment`. */
    config: jsonb("config").$type<ExperimentConfig>().notNull(),
    message: text("message").notNull().default(""),
    createdAt: createdAt(),
  },
  (t) => [uniqueIndex("experiment_versions_experiment_version_uq").on(t.experimentId, t.version)],
);

/** A run's health warning as stored: what kind, at which step, in words. */
export type RunWarning = { code: string; step: number; message: string };

/**
 * An uploaded dataset: rows for a data-dependent environment, or conversations for SFT. The rows themselves are a
 * JSONL file in the artifact store (`path`), each row with its split ("train" or "test").
 */
export const datasets = pgTable(
  "datasets",
  {
    id: text("id").primaryKey(),
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    ownerId: text("owner_id")
      .notNull()
      .references(() => users.id),
    /** What environments (data.dataset) and SFT runs (sft.dataset) of its project call it; unique in the project. */
    name: text("name").notNull(),
    description: text("description").notNull().default(""),
    kind: text("kind").notNull().$type<"rows" | "conversations">(),
    path: text("path").notNull(),
    sizeBytes: integer("size_bytes").notNull(),
    rowCount: integer("row_count").notNull(),
    trainRows: integer("train_rows").notNull(),
    testRows: integer("test_rows").notNull(),
    /** The rows' field names (rows), or the conversations' roles (conversations). */
    fields: jsonb("fields").$type<string[]>().notNull().default([]),
    createdAt: createdAt(),
  },
  (t) => [uniqueIndex("datasets_project_name_uq").on(t.projectId, t.name)],
);

// ── what runs ────────────────────────────────────────────────────────────────────────────────────────────────
/** The states come from the one state machine (lib/lifecycle); only server/jobs writes them. */
export const runStatus = pgEnum("run_status", runStates);

export const runs = pgTable(
  "runs",
  {
    id: text("id").primaryKey(),
    experimentId: text("experiment_id")
      .notNull()
      .references(() => experiments.id, { onDelete: "cascade" }),
    /** Its experiment's project, kept on the run so that checking access to a run (and its points) is one lookup. */
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    /** The exact source and config the run was launched with. */
    experimentVersionId: text("experiment_version_id")
      .notNull()
      .references(() => experimentVersions.id),
    createdBy: text("created_by")
      .notNull()
      .references(() => users.id),
    name: text("name").notNull(),
    status: runStatus("status").notNull().default("queued"),
    /** Why the run ended as it did (failed, cancelled), in words. */
    reason: text("reason"),
    /** Written from `parseRunConfig`, read through it (a run stored before a field existed gets its default). */
    config: jsonb("config").$type<RunConfig>().notNull(),
    seed: integer("seed").notNull().default(0),
    /** Signs that the run cannot learn (lib/rl/health.ts), each kind once, in the order they showed. */
    warnings: jsonb("warnings").$type<RunWarning[]>().notNull().default([]),
    step: integer("step").notNull().default(0),
    totalSteps: integer("total_steps").notNull().default(0),
    /** The step its last resume started from (a checkpoint's), once it has resumed: where `step` went back to. */
    resumedFromStep: integer("resumed_from_step"),
    /** The user's labels for the runs table's filters, each once, in the order they were added. */
    tags: text("tags").array().notNull().default(sql`'{}'::text[]`),
    /** The user's free-text notes on the run. */
    notes: text("notes").notNull().default(""),
    /** When the user archived it: the runs table hides it unless asked; null while it is not archived. */
    archivedAt: timestamp("archived_at", { withTimezone: true }),
    createdAt: createdAt(),
    startedAt: timestamp("started_at", { withTimezone: true }),
    finishedAt: timestamp("finished_at", { withTimezone: true }),
  },
  (t) => [
    index("runs_experiment_idx").on(t.experimentId, t.createdAt),
    index("runs_created_idx").on(t.createdAt),
    index("runs_status_idx").on(t.status),
    index("runs_project_idx").on(t.projectId, t.createdAt),
  ],
);

/**
 * One value of one named series at one training step. `seq` orders every point ever written, so a live stream
 * can resume from the last id it delivered; the unique key makes a re-sent point (after a worker restart) a no-op.
 */
export const metricPoints = pgTable(
  "metric_points",
  {
    seq: bigserial("seq", { mode: "number" }).primaryKey(),
    runId: text("run_id")
      .notNull()
      .references(() => runs.id, { onDelete: "cascade" }),
    name: text("name").notNull(),
    step: integer("step").notNull(),
    value: doublePrecision("value").notNull(),
    wallTime: timestamp("wall_time", { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    uniqueIndex("metric_points_run_name_step_uq").on(t.runId, t.name, t.step),
    index("metric_points_run_seq_idx").on(t.runId, t.seq),
    // A series' best value (the runs table's max or min summary) is one index probe per run.
    index("metric_points_run_name_value_idx").on(t.runId, t.name, t.value),
  ],
);

export type RolloutTurn = {
  /** Who acted, when several agents played the episode. */
  agent?: string;
  /** Every agent's reward from the step after this turn, when several agents played and the step gave them. */
  rewards?: Record<string, number>;
  observation: string;
  action: string;
  reward?: number;
  /** The advantage the algorithm gave this turn (training rollouts; absent in rows written before it was kept). */
  advantage?: number | null;
  /** Environment-specific rendering (e.g. a game board), shown by the trajectory viewer. */
  render?: string;
  /** The legal actions the policy was held to at this turn, when the environment declares them. */
  legalActions?: { actions: string[] } | { pattern: string };
  info?: Record<string, unknown>;
};

/** One sampled trajectory of one group at one training step. */
export const rollouts = pgTable(
  "rollouts",
  {
    seq: bigserial("seq", { mode: "number" }).primaryKey(),
    runId: text("run_id")
      .notNull()
      .references(() => runs.id, { onDelete: "cascade" }),
    step: integer("step").notNull(),
    groupIndex: integer("group_index").notNull(),
    sampleIndex: integer("sample_index").notNull(),
    /** Evaluation rollouts are kept apart from training ones. */
    split: text("split").notNull().default("train"),
    prompt: text("prompt").notNull().default(""),
    turns: jsonb("turns").$type<RolloutTurn[]>().notNull(),
    /** Reward per reward function, by name. */
    rewards: jsonb("rewards").$type<Record<string, number>>().notNull(),
    totalReward: doublePrecision("total_reward").notNull(),
    advantage: doublePrecision("advantage"),
    /** Tokens of the policy's actions and their logprobs, aligned. */
    tokens: jsonb("tokens").$type<number[]>(),
    tokenLogprobs: jsonb("token_logprobs").$type<number[]>(),
    createdAt: createdAt(),
  },
  (t) => [
    uniqueIndex("rollouts_run_step_group_sample_uq").on(t.runId, t.split, t.step, t.groupIndex, t.sampleIndex),
    index("rollouts_run_seq_idx").on(t.runId, t.seq),
  ],
);

/**
 * "state": weights or adapter, optimizer, RNG (resumable, and a base); "sampler": the weights or adapter alone (a
 * session's saveWeightsForSampler: a base, not resumable); "export": a file to download (an export job's).
 */
export const checkpointKinds = ["state", "sampler", "export"] as const;
export type CheckpointKind = (typeof checkpointKinds)[number];
/** The kinds a run may start from (agent.base), sample from, or export. */
export const baseCheckpointKinds: CheckpointKind[] = ["state", "sampler"];

export const checkpoints = pgTable(
  "checkpoints",
  {
    id: text("id").primaryKey(),
    runId: text("run_id")
      .notNull()
      .references(() => runs.id, { onDelete: "cascade" }),
    step: integer("step").notNull(),
    /** See `checkpointKinds`. */
    kind: text("kind").notNull().$type<CheckpointKind>(),
    path: text("path").notNull(),
    sizeBytes: integer("size_bytes").notNull(),
    /** Why the checkpoint was set aside (it failed its checksum when loaded); it is then neither resumed from nor a base. */
    setAsideReason: text("set_aside_reason"),
    createdAt: createdAt(),
  },
  (t) => [uniqueIndex("checkpoints_run_step_kind_uq").on(t.runId, t.step, t.kind)],
);

// ── how it executes ──────────────────────────────────────────────────────────────────────────────────────────
export const jobKind = pgEnum("job_kind", jobKinds);
export const jobStatus = pgEnum("job_status", jobStates);

export const workers = pgTable("workers", {
  id: text("id").primaryKey(),
  hostname: text("hostname").notNull(),
  pid: integer("pid").notNull(),
  backend: text("backend").notNull(),
  status: text("status").notNull().default("alive"),
  startedAt: timestamp("started_at", { withTimezone: true }).notNull().defaultNow(),
  heartbeatAt: timestamp("heartbeat_at", { withTimezone: true }).notNull().defaultNow(),
  /** How late the worker's own thread ran its timers before its last heartbeat (its event loop's delay), ms. */
  lagMs: integer("lag_ms").notNull().default(0),
  /** The longest wait between two of its heartbeats arriving within the minute before `lateAt`, ms. */
  lateMs: integer("late_ms").notNull().default(0),
  lateAt: timestamp("late_at", { withTimezone: true }),
});

export const runLogs = pgTable(
  "run_logs",
  {
    seq: bigserial("seq", { mode: "number" }).primaryKey(),
    runId: text("run_id")
      .notNull()
      .references(() => runs.id, { onDelete: "cascade" }),
    level: text("level").notNull().$type<"info" | "warn" | "error">(),
    message: text("message").notNull(),
    createdAt: createdAt(),
  },
  (t) => [index("run_logs_run_seq_idx").on(t.runId, t.seq)],
);

/** A remote training session's calls (server/jobs/sessions.ts): state of one primitive call, by the client's own id. */
export const sessionCallState = pgEnum("session_call_state", ["queued", "running", "done", "failed"]);

/**
 * The calls a script made on a remote training session (a run whose job kind is "session"), in the order the
 * worker runs them. The id is the client's: a call sent again after a lost connection finds its row, and its answer
 * when it has one, so no call (an optimizer step) is ever applied twice.
 */
export const sessionCalls = pgTable(
  "session_calls",
  {
    id: text("id").primaryKey(),
    seq: bigserial("seq", { mode: "number" }).notNull(),
    runId: text("run_id")
      .notNull()
      .references(() => runs.id, { onDelete: "cascade" }),
    method: text("method").notNull(),
    /** The call's arguments and its result, as JSON text: a sample's text may hold characters jsonb refuses (NUL). */
    args: text("args").notNull(),
    state: sessionCallState("state").notNull().default("queued"),
    result: text("result"),
    error: text("error"),
    createdAt: createdAt(),
    answeredAt: timestamp("answered_at", { withTimezone: true }),
  },
  (t) => [index("session_calls_run_state_seq_idx").on(t.runId, t.state, t.seq)],
);

export const devices = pgTable(
  "devices",
  {
    id: text("id").primaryKey(),
    workerId: text("worker_id")
      .notNull()
      .references(() => workers.id, { onDelete: "cascade" }),
    kind: text("kind").notNull().$type<"cpu" | "gpu">(),
    name: text("name").notNull(),
    memoryMb: integer("memory_mb").notNull(),
    computeSlots: integer("compute_slots").notNull(),
  },
  (t) => [index("devices_worker_idx").on(t.workerId)],
);

export const jobs = pgTable(
  "jobs",
  {
    id: text("id").primaryKey(),
    kind: jobKind("kind").notNull(),
    /** "lora" or "full" for training jobs. */
    mode: text("mode"),
    runId: text("run_id").references(() => runs.id, { onDelete: "cascade" }),
    userId: text("user_id")
      .notNull()
      .references(() => users.id),
    priority: integer("priority").notNull().default(0),
    status: jobStatus("status").notNull().default("queued"),
    reason: text("reason"),
    footprint: jsonb("footprint").$type<Footprint>().notNull(),
    workerId: text("worker_id").references(() => workers.id, { onDelete: "set null" }),
    deviceId: text("device_id").references(() => devices.id, { onDelete: "set null" }),
    leaseExpiresAt: timestamp("lease_expires_at", { withTimezone: true }),
    attempts: integer("attempts").notNull().default(0),
    /** Times in a row the job lost its worker without its run getting past the step of the loss before; at the limit it fails. */
    workerLosses: integer("worker_losses").notNull().default(0),
    /** The run's step when the job last lost its worker. */
    lostAtStep: integer("lost_at_step"),
    /** The worker whose loss was last counted in workerLosses: forgiven if that worker turns out to have been starved, not dead. */
    lostWorkerId: text("lost_worker_id"),
    lastCheckpointId: text("last_checkpoint_id"),
    /** Set while a worker should stop the job at its next step: "cancel", "pause" or "preempt". */
    stopRequested: text("stop_requested").$type<"cancel" | "pause" | "preempt">(),
    /** Seconds of work the job is expected to take, when known (used by backfill). */
    estimatedSeconds: doublePrecision("estimated_seconds"),
    submittedAt: timestamp("submitted_at", { withTimezone: true }).notNull().defaultNow(),
    startedAt: timestamp("started_at", { withTimezone: true }),
    finishedAt: timestamp("finished_at", { withTimezone: true }),
  },
  (t) => [
    index("jobs_status_priority_idx").on(t.status, t.priority, t.submittedAt),
    index("jobs_worker_idx").on(t.workerId),
    // A run's latest job (its kind, what stops or resumes it).
    index("jobs_run_idx").on(t.runId, t.submittedAt),
  ],
);

// ── sharing ──────────────────────────────────────────────────────────────────────────────────────────────────
/** What a share link shows: one run, a comparison of runs, one trajectory of a run, or a report (its `view.report`). */
export const shareKinds = ["run", "compare", "trajectory", "report"] as const;
export type ShareKind = (typeof shareKinds)[number];

/**
 * A view-only link to runs of one project, with the view it opens (metric panels, smoothing, x-axis, step,
 * sample...). Its holder reads exactly those runs, without an account. Only the SHA-256 of its token is stored.
 */
export const shareLinks = pgTable(
  "share_links",
  {
    id: text("id").primaryKey(),
    tokenHash: text("token_hash").notNull().unique(),
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    kind: text("kind").notNull().$type<ShareKind>(),
    /** The runs it shows (one, except for a comparison). */
    runIds: jsonb("run_ids").$type<string[]>().notNull(),
    /** The view state it opens with, as the page's URL parameters. */
    view: jsonb("view").$type<Record<string, string>>().notNull().default({}),
    title: text("title").notNull(),
    createdBy: text("created_by")
      .notNull()
      .references(() => users.id),
    createdAt: createdAt(),
    expiresAt: timestamp("expires_at", { withTimezone: true }),
    revokedAt: timestamp("revoked_at", { withTimezone: true }),
    lastOpenedAt: timestamp("last_opened_at", { withTimezone: true }),
  },
  (t) => [index("share_links_project_idx").on(t.projectId)],
);

// ── reports ──────────────────────────────────────────────────────────────────────────────────────────────────
/**
 * A saved page of a project: a title and an ordered list of blocks (markdown notes and metric panels over chosen
 * runs of the project), validated by lib/reports/blocks.ts before it is stored. Written only by server/reports.
 */
export const reports = pgTable(
  "reports",
  {
    id: text("id").primaryKey(),
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    title: text("title").notNull(),
    blocks: jsonb("blocks").$type<ReportBlock[]>().notNull().default([]),
    createdBy: text("created_by")
      .notNull()
      .references(() => users.id),
    createdAt: createdAt(),
    updatedAt: timestamp("updated_at", { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [index("reports_project_idx").on(t.projectId, t.updatedAt)],
);

// ── idempotent writes ────────────────────────────────────────────────────────────────────────────────────────
/**
 * The first answer of a write sent with an idempotency key (server/api/idempotency.ts): a retry with the same key
 * gets it back instead of writing again. Keys are scoped by caller and procedure and kept 24 hours.
 */
export const idempotencyKeys = pgTable(
  "idempotency_keys",
  {
    /** Who sent it: `user:<id>` for a person or the local user, `key:<id>` for an API key. */
    caller: text("caller").notNull(),
    /** The procedure or route: `experiments.create`, `bases.import`. */
    procedure: text("procedure").notNull(),
    key: text("key").notNull(),
    /** SHA-256 of the input (without the key): the same key with another input is refused. */
    inputHash: text("input_hash").notNull(),
    /** The answer as superjson's JSON text; null while the first request works on it. */
    answer: text("answer"),
    /**
     * For work done outside the claim's transaction (a base's import): until when its request holds the key. It
     * extends this while it works; a key still without an answer after it was left by a request that died.
     */
    heldUntil: timestamp("held_until", { withTimezone: true }),
    createdAt: createdAt(),
  },
  (t) => [uniqueIndex("idempotency_keys_caller_procedure_key_idx").on(t.caller, t.procedure, t.key), index("idempotency_keys_created_idx").on(t.createdAt)],
);

// ── relations ────────────────────────────────────────────────────────────────────────────────────────────────
export const usersRelations = relations(users, ({ many }) => ({
  experiments: many(experiments),
  datasets: many(datasets),
  apiKeys: many(apiKeys),
}));
export const apiKeysRelations = relations(apiKeys, ({ one }) => ({
  user: one(users, { fields: [apiKeys.userId], references: [users.id] }),
}));
export const experimentsRelations = relations(experiments, ({ one, many }) => ({
  owner: one(users, { fields: [experiments.ownerId], references: [users.id] }),
  versions: many(experimentVersions),
  runs: many(runs),
}));
export const experimentVersionsRelations = relations(experimentVersions, ({ one }) => ({
  experiment: one(experiments, { fields: [experimentVersions.experimentId], references: [experiments.id] }),
}));
export const runsRelations = relations(runs, ({ one, many }) => ({
  experiment: one(experiments, { fields: [runs.experimentId], references: [experiments.id] }),
  version: one(experimentVersions, { fields: [runs.experimentVersionId], references: [experimentVersions.id] }),
  metricPoints: many(metricPoints),
  rollouts: many(rollouts),
  logs: many(runLogs),
  checkpoints: many(checkpoints),
  jobs: many(jobs),
}));
export const metricPointsRelations = relations(metricPoints, ({ one }) => ({
  run: one(runs, { fields: [metricPoints.runId], references: [runs.id] }),
}));
export const runLogsRelations = relations(runLogs, ({ one }) => ({
  run: one(runs, { fields: [runLogs.runId], references: [runs.id] }),
}));
export const rolloutsRelations = relations(rollouts, ({ one }) => ({
  run: one(runs, { fields: [rollouts.runId], references: [runs.id] }),
}));
export const checkpointsRelations = relations(checkpoints, ({ one }) => ({
  run: one(runs, { fields: [checkpoints.runId], references: [runs.id] }),
}));
export const workersRelations = relations(workers, ({ many }) => ({ devices: many(devices), jobs: many(jobs) }));
export const devicesRelations = relations(devices, ({ one }) => ({
  worker: one(workers, { fields: [devices.workerId], references: [workers.id] }),
}));
export const jobsRelations = relations(jobs, ({ one }) => ({
  run: one(runs, { fields: [jobs.runId], references: [runs.id] }),
  worker: one(workers, { fields: [jobs.workerId], references: [workers.id] }),
  device: one(devices, { fields: [jobs.deviceId], references: [devices.id] }),
}));

export const datasetsRelations = relations(datasets, ({ one }) => ({
  owner: one(users, { fields: [datasets.ownerId], references: [users.id] }),
}));
