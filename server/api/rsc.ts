import "server-only";
import { createTRPCOptionsProxy } from "@trpc/tanstack-react-query";
import { headers } from "next/headers";
import { cache } from "react";
import { makeQueryClient } from "@/lib/trpc/query-client";
import { appRouter, createCaller } from "./root";
import { createTRPCContext } from "./trpc";

/** Server components call procedures through these, without an HTTP round trip. */
export const requestContext = cache(async () => createTRPCContext({ headers: new Headers(await headers()) }));

export const getQueryClient = cache(makeQueryClient);

/** Query options for prefetching into the request's query client (hydrated into client components). */
export const trpc = createTRPCOptionsProxy({ router: appRouter, ctx: requestContext, queryClient: getQueryClient });

/** Direct calls for server components that render the data themselves. */
export const serverCaller = cache(async () => createCaller(await requestContext()));

/**
 * Who opens a page, for pages that change with it (which member row is "you", whether an invitation can be
 * accepted now): the local user, a signed-in person, or nobody (a signed-out visitor of a team server).
 */
export const pageViewer = cache(async () => {
  const context = await requestContext();
  return { kind: context.access.principal.kind, user: context.user };
});
