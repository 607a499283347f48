/**
 * API keys (server/auth/api-keys.ts), each person's own: made for one project with a role no stronger than theirs
 * there (the role "admin": the server's admin only), shown once, listed by prefix, revocable. Only people signed in
 * manage keys (a key cannot make keys).
 */
import { TRPCError } from "@trpc/server";
import { z } from "zod";
import { apiKeyRoles } from "../../db";
import { createApiKey, daysFromNow, isServerAdmin, listApiKeys, revokeApiKey } from "../../auth";
import { createTRPCRouter, personProcedure } from "../trpc";

export const apiKeysRouter = createTRPCRouter({
  list: personProcedure.query(({ ctx }) => listApiKeys(ctx.db, ctx.user.id)),

  /** Makes a key; the answer holds the key itself, which is never shown again. */
  create: personProcedure
    .input(
      z.object({
        name: z.string().trim().min(1, "name the key after where it is used (a laptop, a CI job)").max(120),
        projectId: z.string().min(1).max(200),
        role: z.enum(apiKeyRoles).default("editor").describe("admin: the project's owner, and the server's admin actions (importing bases)"),
        expiresInDays: z.number().int().min(1).max(365).nullable().default(90).describe("null: until revoked"),
      }),
    )
    .mutation(async ({ ctx, input }) => {
      // The maker must hold the role it gives the key in that project; an admin key is its project's owner.
      await ctx.access.require(input.role === "admin" ? "owner" : input.role, { kind: "project", id: input.projectId });
      if (input.role === "admin" && !isServerAdmin(ctx.access.principal)) {
        throw new TRPCError({
          code: "FORBIDDEN",
          message: "role: admin acts for the whole server, so only the server's admin may make such a key; choose viewer, editor or owner.",
        });
      }
      const expiresAt = daysFromNow(input.expiresInDays);
      const made = await createApiKey(ctx.db, { userId: ctx.user.id, name: input.name, projectId: input.projectId, role: input.role, expiresAt });
      return { ...made, expiresAt };
    }),

  revoke: personProcedure.input(z.object({ id: z.string().min(1).max(200) })).mutation(async ({ ctx, input }) => {
    await revokeApiKey(ctx.db, ctx.user.id, input.id);
    return { id: input.id };
  }),
});
