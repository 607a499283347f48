/**
 * A run's stored rollouts as JSON Lines, streamed: every rollout of the run (training, then evaluation; each by
 * step, group and sample), or those of one split, one step, or both. The stream reads the database a page at a time
 * as its reader takes lines, so a run of any size is never held in memory, and stops reading when the reader goes.
 */
import { and, asc, eq, inArray, max, min, sql } from "drizzle-orm";
import { importedTokenizerOf } from "../base-tokenizers";
import { type Database, rollouts, runs } from "../db";
import { rolloutColumns } from "./read";

export type RolloutSplit = "train" | "eval";
export const ROLLOUT_SPLITS: readonly RolloutSplit[] = ["train", "eval"];

/** Rollouts read per query: a few MiB at the largest rollouts (docs/RUNTIME.md: up to 6 KiB of JSON each). */
const PAGE_ROWS = 500;

/** Where a run's rollouts of one split start and end, or null where it has none. */
export async function rolloutSpan(db: Database, runId: string, split: RolloutSplit): Promise<{ first: number; last: number } | null> {
  const [span] = await db
    .select({ first: min(rollouts.step), last: max(rollouts.step) })
    .from(rollouts)
    .where(and(eq(rollouts.runId, runId), eq(rollouts.split, split)));
  return span?.first == null || span.last == null ? null : { first: span.first, last: span.last };
}

/** Whether the run has any rollout of these splits at `step`. */
export async function hasRolloutsAt(db: Database, runId: string, splits: readonly RolloutSplit[], step: number): Promise<boolean> {
  const [row] = await db
    .select({ step: rollouts.step })
    .from(rollouts)
    .where(and(eq(rollouts.runId, runId), inArray(rollouts.split, [...splits]), eq(rollouts.step, step)))
    .limit(1);
  return row !== undefined;
}

/**
 * The rollouts of `splits` (at `step` alone when it is given), one JSON object a line: the run, split and step, the
 * group and sample, and the sample as the trajectory viewer has it (an imported model's token ids with their text).
 */
export function rolloutLines(db: Database, runId: string, options: { splits: readonly RolloutSplit[]; step?: number }): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  const splits = [...options.splits];
  /** The last row sent of the split being read: the next page starts after it. */
  let after: { step: number; groupIndex: number; sampleIndex: number } | null = null;
  let tokenizer: Awaited<ReturnType<typeof importedTokenizerOf>> | undefined;
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (tokenizer === undefined) {
        const [run] = await db.select({ config: runs.config }).from(runs).where(eq(runs.id, runId));
        const base = run?.config.agent?.base;
        tokenizer = typeof base === "string" ? await importedTokenizerOf(db, base) : null;
      }
      for (;;) {
        const split = splits[0];
        if (split === undefined) {
          controller.close();
          return;
        }
        const page = await db
          .select({ step: rollouts.step, ...rolloutColumns })
          .from(rollouts)
          .where(
            and(
              eq(rollouts.runId, runId),
              eq(rollouts.split, split),
              options.step === undefined ? undefined : eq(rollouts.step, options.step),
              // Keyset paging along the unique index (run, split, step, group, sample): each page one index range.
              after === null
                ? undefined
                : sql`(${rollouts.step}, ${rollouts.groupIndex}, ${rollouts.sampleIndex}) > (${after.step}, ${after.groupIndex}, ${after.sampleIndex})`,
            ),
          )
          .orderBy(asc(rollouts.step), asc(rollouts.groupIndex), asc(rollouts.sampleIndex))
          .limit(PAGE_ROWS);
        if (page.length < PAGE_ROWS) {
          splits.shift();
          after = null;
        } else after = page.at(-1)!;
        if (page.length === 0) continue;
        const lines = page.map(({ step, ...sample }) => {
          const tokenTexts = tokenizer && sample.tokens ? sample.tokens.map((t) => tokenizer!.tokenText(t)) : null;
          return `${JSON.stringify({ runId, split, step, ...sample, tokenTexts })}\n`;
        });
        controller.enqueue(encoder.encode(lines.join("")));
        return;
      }
    },
  });
}
