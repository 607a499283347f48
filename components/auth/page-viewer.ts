import "server-only";
import { cache } from "react";
import { requestContext } from "@/server/api/rsc";

/**
 * Who opens a page, for pages that change with it (which member row is "you", whether an invitation can be
 * accepted now): the local user, a signed-in person, or nobody (a signed-out visitor of a team server).
 */
export const pageViewer = cache(async () => {
  const context = await requestContext();
  return { kind: context.access.principal.kind, user: context.user };
});
