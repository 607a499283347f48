/**
 * The trace format the simulator replays: devices, models, jobs with arrival times and true durations, and user
 * actions (pause, resume, cancel). The generator in trace-generator.ts produces the same shape, and a JSON file
 * in it can be replayed with `npm run bench:scheduler -- --trace FILE`. docs/SCHEDULER.md documents every field.
 */
import { z } from "zod";
import { jobKinds, jobModes, weightDtypes } from "./resources";

const modelSchema = z.object({
  parameters: z.number().positive().describe("parameter count of the whole model"),
  dModel: z.number().int().positive().describe("width of the residual stream"),
  nLayers: z.number().int().positive().describe("number of transformer blocks"),
});

const deviceGroupSchema = z.object({
  name: z.string().min(1).describe("device class, e.g. 'h100-80g'; devices are named name-0, name-1, ..."),
  count: z.number().int().positive().default(1),
  kind: z.enum(["cpu", "gpu"]).default("gpu"),
  memoryMb: z.number().int().positive(),
  computeSlots: z.number().int().positive(),
});

const traceJobSchema = z.object({
  id: z.string().min(1),
  arrival: z.number().min(0).describe("submit time, seconds from the start of the trace"),
  user: z.string().min(1),
  priority: z.number().int().default(0).describe("higher runs first; the baseline ignores it"),
  kind: z.enum(jobKinds),
  mode: z.enum(jobModes),
  model: z.string().min(1).describe("a key of `models`"),
  batchSize: z.number().int().positive().describe("sequences in one forward(-backward) pass"),
  contextLength: z.number().int().positive(),
  loraRank: z.number().int().positive().optional(),
  weightDtype: z.enum(weightDtypes).default("fp32"),
  computeSlots: z.number().positive().describe("slots the job keeps busy alone; fewer make it slower"),
  durationSeconds: z.number().positive().describe("true run time with its slots to itself; the policy never sees it"),
  estimatedSeconds: z.number().positive().nullable().default(null).describe("what the scheduler is told, or null"),
});

const actionSchema = z.object({
  at: z.number().min(0),
  job: z.string().min(1),
  action: z.enum(["pause", "resume", "cancel"]),
});

const traceSchema = z
  .object({
    name: z.string().min(1),
    checkpointIntervalSeconds: z.number().positive().default(600).describe("training jobs checkpoint after every this many seconds of progress"),
    models: z.record(z.string(), modelSchema),
    devices: z.array(deviceGroupSchema).min(1),
    jobs: z.array(traceJobSchema),
    actions: z.array(actionSchema).default([]),
  })
  .superRefine((trace, ctx) => {
    const ids = new Set<string>();
    trace.jobs.forEach((job, i) => {
      if (ids.has(job.id)) ctx.addIssue({ code: "custom", path: ["jobs", i, "id"], message: `duplicate job id '${job.id}'` });
      ids.add(job.id);
      if (!(job.model in trace.models)) {
        const known =
          Object.keys(trace.models)
            .map((m) => `'${m}'`)
            .join(", ") || "none";
        ctx.addIssue({ code: "custom", path: ["jobs", i, "model"], message: `unknown model '${job.model}'; models has ${known}` });
      }
    });
    trace.actions.forEach((action, i) => {
      if (!ids.has(action.job)) ctx.addIssue({ code: "custom", path: ["actions", i, "job"], message: `no job with id '${action.job}'` });
    });
  });

export type Trace = z.output<typeof traceSchema>;
export type TraceInput = z.input<typeof traceSchema>;
export type TraceJob = Trace["jobs"][number];
export type TraceAction = Trace["actions"][number];

/** Validates parsed JSON as a trace; the error lists every bad field with its path and what is accepted. */
export function parseTrace(input: unknown, source = "trace"): Trace {
  const parsed = traceSchema.safeParse(input);
  if (parsed.success) return parsed.data;
  const problems = parsed.error.issues.map((issue) => {
    const path = issue.path
      .map((p) => (typeof p === "number" ? `[${p}]` : `.${String(p)}`))
      .join("")
      .replace(/^\./, "");
    return `  ${path || "(top level)"}: ${issue.message}`;
  });
  throw new Error(`${source} is not a valid trace:\n${problems.join("\n")}`);
}
