import { createTRPCClient, httpBatchLink } from "@trpc/client";
import superjson from "superjson";
import type { AppRouter } from "../api/root";
import { WORKER_TOKEN_HEADER } from "../api/routers/worker";

/** The tRPC client a worker uses to reach its server. */
export function createWorkerApi(serverUrl: string, token: string) {
  return createTRPCClient<AppRouter>({
    links: [httpBatchLink({ url: `${serverUrl.replace(/\/$/, "")}/api/trpc`, transformer: superjson, headers: { [WORKER_TOKEN_HEADER]: token } })],
  });
}

export type WorkerApi = ReturnType<typeof createWorkerApi>;
