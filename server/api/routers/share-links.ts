/**
 * Share links (server/auth/share-links.ts): view-only links to a run, a comparison or a trajectory, made by a
 * project's editors, listed on the runs they show, revocable. Opening one needs nothing but its token.
 */
import { TRPCError } from "@trpc/server";
import { z } from "zod";
import { shareKinds } from "../../db";
import { daysFromNow, LINK_GONE, listedShareLink, listShareLinks, openShareLink, revokeShareLink, shareRuns } from "../../auth";
import { projectOfRun } from "../../runs";
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
      const expiresAt = daysFromNow(input.expiresInDays);
      const { id, token } = await shareRuns(ctx.db, ctx.access, { ...input, createdBy: ctx.user.id, expiresAt });
      // The link as the panel lists it, so the list shows it at once.
      return { id, token, path: `/s/${token}`, expiresAt, link: await listedShareLink(ctx.db, id) };
    }),

  /** The links that show a run (revoked and expired ones too, marked so), newest first. */
  ofRun: projectProcedure("viewer", "run", "runId")
    .input(z.object({ runId: z.string().min(1) }))
    .query(async ({ ctx, input }) => listShareLinks(ctx.db, await projectOfRun(ctx.db, input.runId), input.runId)),

  /** Every link of a project, newest first. */
  ofProject: projectProcedure("viewer", "project", "projectId")
    .input(z.object({ projectId: z.string().min(1) }))
    .query(({ ctx, input }) => listShareLinks(ctx.db, input.projectId)),

  revoke: projectProcedure("editor", "shareLink", "id")
    .input(z.object({ id: z.string().min(1) }))
    .mutation(async ({ ctx, input }) => {
      await revokeShareLink(ctx.db, input.id);
      return { id: input.id };
    }),

  /** What a link shows (its kind, runs, view and title): the shared page's first question. */
  open: publicProcedure.input(z.object({ token: z.string().min(1).max(200) })).query(async ({ ctx, input }) => {
    const link = await openShareLink(ctx.db, input.token);
    if (!link) throw new TRPCError({ code: "NOT_FOUND", message: LINK_GONE });
    return { kind: link.kind, runIds: link.runIds, view: link.view, title: link.title, expiresAt: link.expiresAt };
  }),
});
