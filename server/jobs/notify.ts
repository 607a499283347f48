import { sql } from "drizzle-orm";
import type { Database } from "../db";

/** The NOTIFY channel of the scheduler: a JSON payload `JobsNotice`. */
export const JOBS_CHANNEL = "tinkerlab_jobs";

/** What changed: a job was queued, a device was freed, or jobs were placed on these workers. */
export type JobsNotice = { queued?: true; freed?: true; placedOn?: string[] };

/** Tells every listening worker (LISTEN `JOBS_CHANNEL`) that the queue or the devices changed; sent at commit. */
export async function notifyJobs(db: Database, notice: JobsNotice): Promise<void> {
  await db.execute(sql`select pg_notify(${JOBS_CHANNEL}, ${JSON.stringify(notice)})`);
}
