/**
 * Projects, their members and invitation links (server/auth/projects.ts). Whoever makes a project owns it; owners
 * invite people by link, change roles and remove members; anyone signed in may leave a project, except its last owner.
 */
import { TRPCError } from "@trpc/server";
import { z } from "zod";
import { projectRoles } from "../../db";
import {
  acceptInvitation,
  createInvitation,
  createProject,
  daysFromNow,
  findInvitation,
  listInvitations,
  listMembers,
  projectsOf,
  removeMember,
  renameProject,
  requireProject,
  revokeInvitation,
  setMember,
} from "../../auth";
import { createTRPCRouter, personProcedure, projectProcedure, protectedProcedure, publicProcedure } from "../trpc";

const projectName = z.string().trim().min(1, "give the project a name").max(120, "a project name holds at most 120 characters");
const role = z.enum(projectRoles);

/** The one answer for an invitation that does not work: unknown, revoked and expired alike. */
const INVITATION_GONE = "This invitation link does not exist or no longer works; ask a project owner for a new one.";

export const projectsRouter = createTRPCRouter({
  /** The caller's projects with its role in each (every project, as owner, for the local user; an API key's one project). */
  list: protectedProcedure.query(async ({ ctx }) => {
    const visible = new Set(await ctx.access.visibleProjects());
    const rows = await projectsOf(ctx.db, ctx.user.id, ctx.access.principal.kind === "local");
    const out = [];
    for (const row of rows) if (visible.has(row.id)) out.push({ ...row, role: (await ctx.access.roleIn(row.id))! });
    return out;
  }),

  create: personProcedure.input(z.object({ name: projectName })).mutation(async ({ ctx, input }) => {
    return createProject(ctx.db, { name: input.name, ownerId: ctx.user.id });
  }),

  byId: projectProcedure("viewer", "project", "id")
    .input(z.object({ id: z.string().min(1) }))
    .query(async ({ ctx, input }) => ({ ...(await requireProject(ctx.db, input.id)), role: (await ctx.access.roleIn(input.id))! })),

  rename: projectProcedure("owner", "project", "id")
    .input(z.object({ id: z.string().min(1), name: projectName }))
    .mutation(async ({ ctx, input }) => {
      await renameProject(ctx.db, input.id, input.name);
      return { id: input.id };
    }),

  members: projectProcedure("viewer", "project", "projectId")
    .input(z.object({ projectId: z.string().min(1) }))
    .query(({ ctx, input }) => listMembers(ctx.db, input.projectId)),

  /** Changes a member's role; a project keeps at least one owner. */
  setRole: projectProcedure("owner", "project", "projectId")
    .input(z.object({ projectId: z.string().min(1), userId: z.string().min(1).max(200), role }))
    .mutation(async ({ ctx, input }) => {
      const members = await listMembers(ctx.db, input.projectId);
      if (!members.some((m) => m.userId === input.userId))
        throw new TRPCError({ code: "NOT_FOUND", message: `No member with id '${input.userId}' in this project` });
      await setMember(ctx.db, input.projectId, input.userId, input.role);
      return { userId: input.userId, role: input.role };
    }),

  removeMember: projectProcedure("owner", "project", "projectId")
    .input(z.object({ projectId: z.string().min(1), userId: z.string().min(1).max(200) }))
    .mutation(async ({ ctx, input }) => {
      await removeMember(ctx.db, input.projectId, input.userId);
      return { userId: input.userId };
    }),

  /** Leaves a project (its last owner cannot: it makes someone else owner first). */
  leave: projectProcedure("viewer", "project", "projectId")
    .input(z.object({ projectId: z.string().min(1) }))
    .mutation(async ({ ctx, input }) => {
      await removeMember(ctx.db, input.projectId, ctx.user.id);
      return { projectId: input.projectId };
    }),

  /** A project's invitation links (never their tokens), newest first. */
  invitations: projectProcedure("owner", "project", "projectId")
    .input(z.object({ projectId: z.string().min(1) }))
    .query(({ ctx, input }) => listInvitations(ctx.db, input.projectId)),

  /** Makes an invitation link: whoever opens it joins with `role` until it expires or is revoked. The token is shown once. */
  invite: projectProcedure("owner", "project", "projectId")
    .input(z.object({ projectId: z.string().min(1), role: role.default("editor"), expiresInDays: z.number().int().min(1).max(30).default(7) }))
    .mutation(async ({ ctx, input }) => {
      const expiresAt = daysFromNow(input.expiresInDays)!;
      const { id, token } = await createInvitation(ctx.db, { projectId: input.projectId, role: input.role, createdBy: ctx.user.id, expiresAt });
      return { id, token, path: `/invite/${token}`, expiresAt };
    }),

  revokeInvitation: projectProcedure("owner", "invitation", "id")
    .input(z.object({ id: z.string().min(1) }))
    .mutation(async ({ ctx, input }) => {
      await revokeInvitation(ctx.db, input.id);
      return { id: input.id };
    }),

  /** What an invitation link offers (the project's name and the role), for the page that asks to accept it. */
  invitation: publicProcedure.input(z.object({ token: z.string().min(1).max(200) })).query(async ({ ctx, input }) => {
    const invitation = await findInvitation(ctx.db, input.token);
    if (!invitation) throw new TRPCError({ code: "NOT_FOUND", message: INVITATION_GONE });
    return { projectName: invitation.projectName, role: invitation.role, expiresAt: invitation.expiresAt };
  }),

  /** Joins the invitation's project (a member already holding a stronger role keeps it). */
  acceptInvitation: personProcedure.input(z.object({ token: z.string().min(1).max(200) })).mutation(async ({ ctx, input }) => {
    const joined = await acceptInvitation(ctx.db, input.token, ctx.user.id);
    if (!joined) throw new TRPCError({ code: "NOT_FOUND", message: INVITATION_GONE });
    return joined;
  }),
});
