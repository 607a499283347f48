import { fetchRequestHandler } from "@trpc/server/adapters/fetch";
import { holdToRequestLimit, appRouter, createTRPCContext, internalErrorId, retryAfterHeaders } from "@/server/api";

export const dynamic = "force-dynamic";

const handler = async (request: Request) => {
  // The web server's gate has refused what it refuses and held the body to its procedure's limit already; this does
  // both when Next.js runs on its own (`next dev`). Behind the gate it costs a few comparisons, or one more count of
  // a body sent without Content-Length (server/api/limits.ts).
  const req = await holdToRequestLimit(request);
  if (req instanceof Response) return req;
  return fetchRequestHandler({
    endpoint: "/api/trpc",
    req,
    router: appRouter,
    createContext: () => createTRPCContext({ headers: req.headers }),
    // A call refused for its rate says when to retry (server/api/rate-limits.ts).
    responseMeta: retryAfterHeaders,
    onError({ path, error }) {
      // Logged once, with the id the client was given in place of the details (server/api/trpc.ts's errorFormatter).
      if (error.code === "INTERNAL_SERVER_ERROR") internalErrorId(error, path);
    },
  });
};

export { handler as GET, handler as POST };
