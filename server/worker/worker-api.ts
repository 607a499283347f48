import { createTRPCClient, httpBatchLink, httpLink } from "@trpc/client";
import superjson from "superjson";
import type { AppRouter } from "../api";
import { MAX_BATCH_CALLS } from "../../lib/trpc/limits";
import { WORKER_TOKEN_HEADER } from "../worker-protocol";

/**
 * The tRPC client a worker uses to reach its server. It asks for answers uncompressed: most are a few bytes (a
 * report's "stored", sent every training step), and a gzip stream per response cost the server more CPU than it
 * saved bytes; the largest, a claimed job's config and files, comes once per job. Calls made together go in one
 * request (`batch`, the default); without it, each call is its own request, sent at once.
 */
export function createWorkerApi(serverUrl: string, token: string, options: { batch?: boolean } = {}) {
  const link = {
    url: `${serverUrl.replace(/\/$/, "")}/api/trpc`,
    transformer: superjson,
    headers: { [WORKER_TOKEN_HEADER]: token, "accept-encoding": "identity" },
  };
  return createTRPCClient<AppRouter>({ links: [options.batch === false ? httpLink(link) : httpBatchLink({ ...link, maxItems: MAX_BATCH_CALLS })] });
}

export type WorkerApi = ReturnType<typeof createWorkerApi>;
