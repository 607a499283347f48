/**
 * A run's live metric feed as the API answers it (server/metrics/feed.ts): the stream of frames after an event id,
 * and the summary its first event would give. A run that does not exist is NOT_FOUND; an id that is no event id
 * of the stream is BAD_REQUEST.
 */
import { TRPCError } from "@trpc/server";
import type { Database } from "../db";
import { type FeedFrame, feedFrames, runFeed, RunNotFoundError } from "../metrics";

/** The run's frames after event `lastEventId` (none: from the start, the history as a summary), until the run ends. */
export async function* metricFrames(db: Database, runId: string, lastEventId: string | null | undefined, signal?: AbortSignal): AsyncGenerator<FeedFrame> {
  const after = Number(lastEventId ?? 0);
  if (!Number.isSafeInteger(after) || after < 0) {
    throw new TRPCError({
      code: "BAD_REQUEST",
      message: `lastEventId: '${lastEventId}' is not an event id of this stream (a sequence number, 0 or more)`,
    });
  }
  try {
    yield* feedFrames(db, runId, after, signal);
  } catch (error) {
    throw asNotFound(error);
  }
}

/** The run's metrics so far as the stream's first event would give them, and that event's id; null before any point. */
export async function metricSummary(db: Database, runId: string): Promise<{ id: string; event: FeedFrame["data"] } | null> {
  try {
    const frame = await runFeed(db, runId).summary();
    return frame ? { id: frame.id, event: frame.data } : null;
  } catch (error) {
    throw asNotFound(error);
  }
}

const asNotFound = (error: unknown) => (error instanceof RunNotFoundError ? new TRPCError({ code: "NOT_FOUND", message: error.message }) : error);
