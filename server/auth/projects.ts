/**
 * Projects, their members and invitation links. Whoever makes a project owns it; owners add people through
 * invitation links (a role, an expiry, revocable; only the token's SHA-256 is stored) and change or remove
 * members' roles. A project always keeps at least one owner.
 */
import { TRPCError } from "@trpc/server";
import { and, asc, count, desc, eq, gt, isNull, sql } from "drizzle-orm";
import { type Database, newId, projectInvitations, projectMembers, type ProjectRole, projects, users } from "../db";
import { atLeast } from "./access";
import { hashToken, looksLikeToken, newToken } from "./tokens";

/** The project of what a server made before projects existed, and of the built-in examples. */
export const DEFAULT_PROJECT = "prj_default";

export async function createProject(db: Database, options: { name: string; ownerId: string }): Promise<{ id: string }> {
  const id = newId("prj");
  await db.insert(projects).values({ id, name: options.name, createdBy: options.ownerId });
  await db.insert(projectMembers).values({ projectId: id, userId: options.ownerId, role: "owner" });
  return { id };
}

/** A project's name and when it was made, or NOT_FOUND. */
export async function requireProject(db: Database, id: string) {
  const [row] = await db.select({ id: projects.id, name: projects.name, createdAt: projects.createdAt }).from(projects).where(eq(projects.id, id));
  if (!row) throw new TRPCError({ code: "NOT_FOUND", message: `No project with id '${id}'` });
  return row;
}

export async function renameProject(db: Database, id: string, name: string): Promise<void> {
  await db.update(projects).set({ name }).where(eq(projects.id, id));
}

/** Makes `userId` a member with `role`, or changes its role (never lowering the last owner's). */
export async function setMember(db: Database, projectId: string, userId: string, role: ProjectRole): Promise<void> {
  if (role !== "owner") await keepAnOwner(db, projectId, userId);
  await db
    .insert(projectMembers)
    .values({ projectId, userId, role })
    .onConflictDoUpdate({ target: [projectMembers.projectId, projectMembers.userId], set: { role } });
}

export async function removeMember(db: Database, projectId: string, userId: string): Promise<void> {
  await keepAnOwner(db, projectId, userId);
  await db.delete(projectMembers).where(and(eq(projectMembers.projectId, projectId), eq(projectMembers.userId, userId)));
}

/** Refuses a change that would leave the project without an owner: `userId` is its only owner. */
async function keepAnOwner(db: Database, projectId: string, userId: string): Promise<void> {
  const owners = await db
    .select({ userId: projectMembers.userId })
    .from(projectMembers)
    .where(and(eq(projectMembers.projectId, projectId), eq(projectMembers.role, "owner")));
  if (owners.length === 1 && owners[0]!.userId === userId) {
    throw new TRPCError({ code: "BAD_REQUEST", message: "A project keeps at least one owner: make someone else owner first." });
  }
}

export async function listMembers(db: Database, projectId: string) {
  return db
    .select({ userId: users.id, name: users.name, email: users.email, role: projectMembers.role, since: projectMembers.createdAt })
    .from(projectMembers)
    .innerJoin(users, eq(users.id, projectMembers.userId))
    .where(eq(projectMembers.projectId, projectId))
    .orderBy(asc(projectMembers.createdAt));
}

/** The projects a user belongs to, with its role and each project's member count. `all` lists every project (the local user). */
export async function projectsOf(db: Database, userId: string, all = false) {
  const memberCount = db
    .select({ projectId: projectMembers.projectId, members: count().as("members") })
    .from(projectMembers)
    .groupBy(projectMembers.projectId)
    .as("member_count");
  const rows = await db
    .select({ id: projects.id, name: projects.name, createdAt: projects.createdAt, role: projectMembers.role, members: memberCount.members })
    .from(projects)
    .leftJoin(projectMembers, and(eq(projectMembers.projectId, projects.id), eq(projectMembers.userId, userId)))
    .leftJoin(memberCount, eq(memberCount.projectId, projects.id))
    .where(all ? undefined : sql`${projectMembers.userId} is not null`)
    .orderBy(asc(projects.createdAt));
  return rows.map((row) => ({ ...row, role: (row.role ?? "owner") as ProjectRole, members: Number(row.members ?? 0) }));
}

export async function createInvitation(
  db: Database,
  options: { projectId: string; role: ProjectRole; createdBy: string; expiresAt: Date },
): Promise<{ id: string; token: string }> {
  const token = newToken("tli");
  const id = newId("inv");
  await db.insert(projectInvitations).values({ id, tokenHash: hashToken(token), ...options });
  return { id, token };
}

/** A project's invitation links (never their tokens), newest first, with who made them. */
export async function listInvitations(db: Database, projectId: string) {
  return db
    .select({
      id: projectInvitations.id,
      role: projectInvitations.role,
      createdAt: projectInvitations.createdAt,
      expiresAt: projectInvitations.expiresAt,
      revokedAt: projectInvitations.revokedAt,
      accepted: projectInvitations.accepted,
      createdBy: users.name,
    })
    .from(projectInvitations)
    .innerJoin(users, eq(users.id, projectInvitations.createdBy))
    .where(eq(projectInvitations.projectId, projectId))
    .orderBy(desc(projectInvitations.createdAt));
}

export async function revokeInvitation(db: Database, id: string): Promise<void> {
  await db.update(projectInvitations).set({ revokedAt: new Date() }).where(eq(projectInvitations.id, id));
}

/** The invitation a token names while it works (not revoked, not expired), with its project's name; else null. */
export async function findInvitation(db: Database, token: string) {
  if (!looksLikeToken(token, "tli")) return null;
  const [row] = await db
    .select({
      id: projectInvitations.id,
      projectId: projectInvitations.projectId,
      projectName: projects.name,
      role: projectInvitations.role,
      expiresAt: projectInvitations.expiresAt,
    })
    .from(projectInvitations)
    .innerJoin(projects, eq(projects.id, projectInvitations.projectId))
    .where(and(eq(projectInvitations.tokenHash, hashToken(token)), isNull(projectInvitations.revokedAt), gt(projectInvitations.expiresAt, new Date())));
  return row ?? null;
}

/**
 * Joins `userId` to the invitation's project with its role. A member already holding a stronger role keeps it.
 * Returns the project, or null when the invitation does not work (any more).
 */
export async function acceptInvitation(
  db: Database,
  token: string,
  userId: string,
): Promise<{ projectId: string; projectName: string; role: ProjectRole } | null> {
  const invitation = await findInvitation(db, token);
  if (!invitation) return null;
  const [current] = await db
    .select({ role: projectMembers.role })
    .from(projectMembers)
    .where(and(eq(projectMembers.projectId, invitation.projectId), eq(projectMembers.userId, userId)));
  const role = current && atLeast(current.role, invitation.role) ? current.role : invitation.role;
  if (!current || role !== current.role) await setMember(db, invitation.projectId, userId, role);
  await db
    .update(projectInvitations)
    .set({ accepted: sql`${projectInvitations.accepted} + 1` })
    .where(eq(projectInvitations.id, invitation.id));
  return { projectId: invitation.projectId, projectName: invitation.projectName, role };
}
