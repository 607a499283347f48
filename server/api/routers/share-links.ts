/**
 * Share links (server/auth/share-links.ts): view-only links to a run, a comparison or a trajectory, made by a
 * project's editors, listed on the runs they show, revocable. Opening one needs nothing but its token.
 */
import { TRPCError } from "@trpc/server";
import { eq, inArray } from "drizzle-orm";
import { z } from "zod";
import { runs, shareKinds, shareLinks } from "../../db";
import { createShareLink, LINK_GONE, listShareLinks, openShareLink, daysFromNow } from "../../auth";
import { createTRPCRouter, projectProcedure, protectedProcedure, publicProcedure } from "../trpc";

/** The view state a link may carry: the page's URL parameters (panels, smoothing, x-axis, step, sample...). */
const viewSchema = z
  .record(z.string().regex(/^[a-zA-Z][\w.-]{0,39}$/, "view parameters are named with letters, digits, '_', '.' or '-'"), z.string().max(2000))
  .refine((view) => Object.keys(view).length <= 30, "a view holds at most 30 parameters")
  .default({});

export const shareLinksRouter = createTRPCRouter({
  /**
   * Makes a link to one run ("run", "trajectory") or several ("compare", all of one project), opening with `view`.
   * The caller must be an editor of the runs' project. The token is shown once.
   */
  create: protectedProcedure
    .input(
      z.object({
        kind: z.enum(shareKinds),
        runIds: z.array(z.string().min(1).max(200)).min(1).max(12),
        view: viewSchema,
        title: z.string().trim().max(200).optional(),
        expiresInDays: z.number().int().min(1).max(365).nullable().default(null).describe("null: until revoked"),
      }),
    )
    .mutation(async ({ ctx, input }) => {
      if (input.kind !== "compare" && input.runIds.length !== 1) {
        throw new TRPCError({ code: "BAD_REQUEST", message: `runIds: a ${input.kind} link shows one run; a comparison shows several` });
      }
      const runIds = [...new Set(input.runIds)];
      const projectIds = new Set<string>();
      for (const id of runIds) projectIds.add((await ctx.access.require("editor", { kind: "run", id })).projectId);
      if (projectIds.size > 1) throw new TRPCError({ code: "BAD_REQUEST", message: "runIds: a link shows runs of one project" });
      const names = await ctx.db.select({ id: runs.id, name: runs.name }).from(runs).where(inArray(runs.id, runIds));
      const title = input.title || (input.kind === "compare" ? `Comparison of ${runIds.length} runs` : (names[0]?.name ?? runIds[0]!));
      const expiresAt = daysFromNow(input.expiresInDays);
      const { id, token } = await createShareLink(ctx.db, {
        projectId: [...projectIds][0]!,
        kind: input.kind,
        runIds,
        view: input.view,
        title,
        createdBy: ctx.user.id,
        expiresAt,
      });
      return { id, token, path: `/s/${token}`, expiresAt };
    }),

  /** The links that show a run (revoked and expired ones too, marked so), newest first. */
  ofRun: projectProcedure("viewer", "run", "runId")
    .input(z.object({ runId: z.string().min(1) }))
    .query(async ({ ctx, input }) => {
      const [run] = await ctx.db.select({ projectId: runs.projectId }).from(runs).where(eq(runs.id, input.runId));
      return listShareLinks(ctx.db, run!.projectId, input.runId);
    }),

  /** Every link of a project, newest first. */
  ofProject: projectProcedure("viewer", "project", "projectId")
    .input(z.object({ projectId: z.string().min(1) }))
    .query(({ ctx, input }) => listShareLinks(ctx.db, input.projectId)),

  revoke: projectProcedure("editor", "shareLink", "id")
    .input(z.object({ id: z.string().min(1) }))
    .mutation(async ({ ctx, input }) => {
      await ctx.db.update(shareLinks).set({ revokedAt: new Date() }).where(eq(shareLinks.id, input.id));
      return { id: input.id };
    }),

  /** What a link shows (its kind, runs, view and title): the shared page's first question. */
  open: publicProcedure.input(z.object({ token: z.string().min(1).max(200) })).query(async ({ ctx, input }) => {
    const link = await openShareLink(ctx.db, input.token);
    if (!link) throw new TRPCError({ code: "NOT_FOUND", message: LINK_GONE });
    return { kind: link.kind, runIds: link.runIds, view: link.view, title: link.title, expiresAt: link.expiresAt };
  }),
});
