/**
 * API keys (server/auth/api-keys.ts), each person's own: made for one project with a role no stronger than theirs
 * there, shown once, listed by prefix, revocable. Only people signed in manage keys (a key cannot make keys).
 */
import { z } from "zod";
import { projectRoles } from "../../db";
import { createApiKey, daysFromNow, listApiKeys, revokeApiKey } from "../../auth";
import { createTRPCRouter, personProcedure } from "../trpc";

export const apiKeysRouter = createTRPCRouter({
  list: personProcedure.query(({ ctx }) => listApiKeys(ctx.db, ctx.user.id)),

  /** Makes a key; the answer holds the key itself, which is never shown again. */
  create: personProcedure
    .input(
      z.object({
        name: z.string().trim().min(1, "name the key after where it is used (a laptop, a CI job)").max(120),
        projectId: z.string().min(1).max(200),
        role: z.enum(projectRoles).default("editor"),
        expiresInDays: z.number().int().min(1).max(365).nullable().default(90).describe("null: until revoked"),
      }),
    )
    .mutation(async ({ ctx, input }) => {
      // The maker must hold the role it gives the key in that project.
      await ctx.access.require(input.role, { kind: "project", id: input.projectId });
      const expiresAt = daysFromNow(input.expiresInDays);
      const made = await createApiKey(ctx.db, { userId: ctx.user.id, name: input.name, projectId: input.projectId, role: input.role, expiresAt });
      return { ...made, expiresAt };
    }),

  revoke: personProcedure.input(z.object({ id: z.string().min(1).max(200) })).mutation(async ({ ctx, input }) => {
    await revokeApiKey(ctx.db, ctx.user.id, input.id);
    return { id: input.id };
  }),
});
