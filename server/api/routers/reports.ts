/**
 * Reports (server/reports): saved pages of notes and metric panels over a project's runs. Its members read them,
 * its editors make, change, delete and share them; a report's share link opens it read-only (app/s/[token]).
 */
import { z } from "zod";
import { reportBlocksSchema, reportTitleSchema, runsOfBlocks } from "@/lib/reports/blocks";
import { daysFromNow, listedShareLink, listReportLinks, shareReport } from "../../auth";
import { createReport, deleteReport, listReports, reportById, runsOfReport, updateReport } from "../../reports";
import { createTRPCRouter, projectProcedure, protectedProcedure } from "../trpc";

export const reportsRouter = createTRPCRouter({
  /** The reports of the caller's projects (or of one), last edited first; `mayEdit`: the caller may change it. */
  list: protectedProcedure.input(z.object({ projectId: z.string().min(1).optional() }).default({})).query(async ({ ctx, input }) => {
    const visible = await ctx.access.visibleProjects();
    const list = await listReports(ctx.db, input.projectId ? visible.filter((id) => id === input.projectId) : visible);
    const editable = await ctx.access.editableAmong(list.map((report) => report.projectId));
    return list.map((report) => ({ ...report, mayEdit: editable.has(report.projectId) }));
  }),

  /** One report with its blocks, and whether the caller may edit it. */
  byId: projectProcedure("viewer", "report", "id")
    .input(z.object({ id: z.string().min(1) }))
    .query(async ({ ctx, input }) => {
      const report = await reportById(ctx.db, input.id);
      return { ...report, mayEdit: (await ctx.access.editableAmong([report.projectId])).has(report.projectId) };
    }),

  /**
   * A new report in a project the caller edits in: the one named, else that of its panels' runs, else the caller's
   * first such project.
   */
  create: protectedProcedure
    .input(z.object({ projectId: z.string().min(1).optional(), title: reportTitleSchema, blocks: reportBlocksSchema.default([]) }))
    .mutation(async ({ ctx, input }) => {
      const [firstRun] = runsOfBlocks(input.blocks);
      const projectId =
        input.projectId ?? (firstRun ? (await ctx.access.require("editor", { kind: "run", id: firstRun })).projectId : await ctx.access.defaultProject());
      await ctx.access.require("editor", { kind: "project", id: projectId });
      return createReport(ctx.db, { projectId, title: input.title, blocks: input.blocks, createdBy: ctx.user.id });
    }),

  /** Saves a report's title, its blocks (the whole ordered list), or both. */
  update: projectProcedure("editor", "report", "id")
    .input(z.object({ id: z.string().min(1), title: reportTitleSchema.optional(), blocks: reportBlocksSchema.optional() }))
    .mutation(({ ctx, input }) => updateReport(ctx.db, input.id, { title: input.title, blocks: input.blocks })),

  /** Deletes a report and revokes its links. */
  delete: projectProcedure("editor", "report", "id")
    .input(z.object({ id: z.string().min(1) }))
    .mutation(async ({ ctx, input }) => {
      await deleteReport(ctx.db, input.id);
      return { id: input.id };
    }),

  /** A view-only link to the report (its notes and live panels); the token is shown once. */
  share: projectProcedure("editor", "report", "id")
    .input(
      z.object({
        id: z.string().min(1),
        expiresInDays: z.number().int().min(1).max(365).nullable().default(null).describe("null: until revoked"),
      }),
    )
    .mutation(async ({ ctx, input }) => {
      const { projectId, title, runIds } = await runsOfReport(ctx.db, input.id);
      const expiresAt = daysFromNow(input.expiresInDays);
      const { id, token } = await shareReport(ctx.db, { projectId, reportId: input.id, runIds, title, createdBy: ctx.user.id, expiresAt });
      return { id, token, path: `/s/${token}`, expiresAt, link: await listedShareLink(ctx.db, id) };
    }),

  /** The links to a report (revoked and expired ones too), newest first. */
  links: projectProcedure("viewer", "report", "id")
    .input(z.object({ id: z.string().min(1) }))
    .query(({ ctx, input }) => listReportLinks(ctx.db, input.id)),
});
