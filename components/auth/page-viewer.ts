import "server-only";
import { headers } from "next/headers";
import { cache } from "react";
import { createTRPCContext } from "@/server/api/trpc";

/**
 * Who opens a page, for pages that change with it (which member row is "you", whether an invitation can be
 * accepted now): the local user, a signed-in person, or nobody (a signed-out visitor of a team server).
 */
export const pageViewer = cache(async () => {
  const context = await createTRPCContext({ headers: new Headers(await headers()) });
  const { principal } = context.access;
  return { kind: principal.kind, user: context.user };
});
