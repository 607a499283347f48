/**
 * A report's blocks: markdown notes and metric panels over chosen runs, in the order the page shows them. One zod
 * schema serves the API (a malformed block is refused naming its path, `blocks.2.runIds`) and the editor.
 */
import { z } from "zod";

/** As many runs as one panel draws (the compare API's limit). */
export const MAX_PANEL_RUNS = 12;
export const MAX_BLOCKS = 40;
export const MAX_NOTE_CHARS = 20_000;

const blockId = z
  .string()
  .regex(/^[a-zA-Z0-9_-]{1,40}$/, "a block id is 1 to 40 letters, digits, '_' or '-'")
  .describe("stable within the report, so the editor can move a block");

export const noteBlockSchema = z.object({
  kind: z.literal("note"),
  id: blockId,
  markdown: z.string().max(MAX_NOTE_CHARS, `a note holds at most ${MAX_NOTE_CHARS} characters`).describe("the note's text, as markdown"),
});

/** The x-axis of a panel, as the compare view names it: step, wall time, tokens trained, or another metric. */
export const panelXSchema = z.union([z.enum(["step", "time", "tokens"]), z.templateLiteral(["metric:", z.string().min(1).max(200)])], {
  error: "x is 'step', 'time', 'tokens' or 'metric:<name>'",
});

export const panelBlockSchema = z.object({
  kind: z.literal("panel"),
  id: blockId,
  runIds: z
    .array(z.string().min(1).max(200))
    .min(1, "a panel shows at least one run")
    .max(MAX_PANEL_RUNS, `a panel shows at most ${MAX_PANEL_RUNS} runs`)
    .refine((ids) => new Set(ids).size === ids.length, "each run may be named once"),
  metric: z.string().min(1, "a panel names its metric, e.g. 'reward/mean'").max(200),
  x: panelXSchema.default("step"),
  smoothing: z.number().min(0).max(0.99, "smoothing is from 0 (raw) to 0.99").default(0),
  group: z.string().max(200).nullable().default(null).describe("a config field whose value groups the runs into mean lines"),
});

export const reportBlockSchema = z.discriminatedUnion("kind", [noteBlockSchema, panelBlockSchema], {
  error: "a block's kind is 'note' or 'panel'",
});

export const reportBlocksSchema = z.array(reportBlockSchema).max(MAX_BLOCKS, `a report holds at most ${MAX_BLOCKS} blocks`);

export const reportTitleSchema = z.string().trim().min(1, "a report needs a title").max(200, "a title is at most 200 characters");

export type NoteBlock = z.infer<typeof noteBlockSchema>;
export type PanelBlock = z.infer<typeof panelBlockSchema>;
export type ReportBlock = z.infer<typeof reportBlockSchema>;

/** Every run the report's panels show, each once, in the order they first appear. */
export function runsOfBlocks(blocks: readonly ReportBlock[]): string[] {
  return [...new Set(blocks.flatMap((block) => (block.kind === "panel" ? block.runIds : [])))];
}
