/**
 * Who is asking, and what they may touch: the one place that decides access to projects and what belongs to them.
 *
 * A request's principal is the local user (TINKERLAB_AUTH=local: owner of every project), a signed-in person (a
 * team server's session), an API key (one project, at most its role and never more than its maker's current
 * role), a share link's holder (reads exactly the runs the link names), or nobody. `Access.require` checks a role on
 * one object; an object the caller may not see answers NOT_FOUND, worded as for an object that does not exist.
 * What acts for the whole server (importing a base) needs the server's admin: the local user, the admin signed in,
 * or a key the admin made with the admin role (`isServerAdmin`).
 */
import { TRPCError } from "@trpc/server";
import { and, asc, eq } from "drizzle-orm";
import {
  checkpoints,
  type Database,
  datasets,
  experiments,
  projectInvitations,
  projectMembers,
  type ProjectRole,
  projects,
  reports,
  runs,
  shareLinks,
} from "../db";

export type User = { id: string; name: string; email: string };

export type Principal =
  | { kind: "local"; user: User }
  /** `sessionId`: the session it signed in with (none for a person made in process, as tests do). */
  | { kind: "person"; user: User; admin: boolean; sessionId?: string }
  /** `role`: the most the key does in its project; `admin`: made with the admin role by a maker who is the admin now. */
  | { kind: "apikey"; user: User; keyId: string; projectId: string; role: ProjectRole; admin: boolean }
  | { kind: "share"; linkId: string; projectId: string; runIds: string[] }
  | { kind: "anonymous"; rejected?: "apikey" };

const RANK: Record<ProjectRole, number> = { viewer: 1, editor: 2, owner: 3 };

export const atLeast = (role: ProjectRole | null, needed: ProjectRole) => role !== null && RANK[role] >= RANK[needed];
export const weaker = (a: ProjectRole, b: ProjectRole): ProjectRole => (RANK[a] <= RANK[b] ? a : b);

/** Whether the caller may act for the whole server (import a base): the local user, the admin, or an admin key of the admin's. */
export function isServerAdmin(principal: Principal): boolean {
  return principal.kind === "local" || ((principal.kind === "person" || principal.kind === "apikey") && principal.admin);
}

/** Why a caller may not act for the whole server, in words that say what it takes. */
export function serverAdminRefusal(principal: Principal, action: string): string {
  const who = "only the server's admin may (local mode's user, or a team server's first account)";
  if (principal.kind === "apikey") {
    return `${action}: ${who}, signed in or with an API key that the admin made with the admin role; this key has no admin role.`;
  }
  return `${action}: ${who}.`;
}

/** Why a share link's holder gets no file (a model, an export): a link shows a run's view, never its files (docs/AUTH.md). */
export const SHARE_LINKS_DOWNLOAD_NO_FILES =
  "A share link shows a run's view, never its files: models and exports are for the project's members. Sign in, or send an API key as 'Authorization: Bearer tl_…'.";

/** What a per-object check can name, and the input field that holds its id. */
export type ObjectKind = "project" | "experiment" | "run" | "checkpoint" | "dataset" | "shareLink" | "invitation" | "report";

const NOUN: Record<ObjectKind, string> = {
  project: "project",
  experiment: "experiment",
  run: "run",
  checkpoint: "checkpoint",
  dataset: "dataset",
  shareLink: "share link",
  invitation: "invitation",
  report: "report",
};

/** What each role may do, in words, for the refusal a member with too weak a role gets. */
const ROLE_NEEDED: Record<ProjectRole, string> = {
  viewer: "viewing",
  editor: "creating, editing, launching and stopping (an editor's role)",
  owner: "managing members, invitations and the project (an owner's role)",
};

export class Access {
  private roles: Promise<Map<string, ProjectRole>> | null = null;

  constructor(
    private readonly db: Database,
    readonly principal: Principal,
  ) {}

  /** The signed-in user behind the request (local, session or API key), or null for a link holder or nobody. */
  get user(): User | null {
    return "user" in this.principal ? this.principal.user : null;
  }

  /** The caller's role in a project, or null when it is not a member (a link holder is no member). */
  async roleIn(projectId: string): Promise<ProjectRole | null> {
    const p = this.principal;
    if (p.kind === "local") return (await this.projectExists(projectId)) ? "owner" : null;
    if (p.kind === "share" || p.kind === "anonymous") return null;
    return (await this.memberships()).get(projectId) ?? null;
  }

  /** The projects whose objects lists may show: every project for the local user, else the caller's memberships. */
  async visibleProjects(): Promise<string[]> {
    const p = this.principal;
    if (p.kind === "local") return (await this.db.select({ id: projects.id }).from(projects).orderBy(asc(projects.createdAt))).map((row) => row.id);
    if (p.kind === "share" || p.kind === "anonymous") return [];
    return [...(await this.memberships()).keys()];
  }

  /** Those of these projects the caller may edit in (an editor or above): what a list offers to change. */
  async editableAmong(projectIds: Iterable<string>): Promise<Set<string>> {
    const editable = new Set<string>();
    for (const projectId of new Set(projectIds)) if (atLeast(await this.roleIn(projectId), "editor")) editable.add(projectId);
    return editable;
  }

  /** The caller's roles by project: a person's memberships; a key's one project at the weaker of its role and its maker's. */
  private memberships(): Promise<Map<string, ProjectRole>> {
    this.roles ??= (async () => {
      const p = this.principal;
      if (p.kind !== "person" && p.kind !== "apikey") return new Map();
      const rows = await this.db
        .select({ projectId: projectMembers.projectId, role: projectMembers.role })
        .from(projectMembers)
        .where(and(eq(projectMembers.userId, p.user.id), p.kind === "apikey" ? eq(projectMembers.projectId, p.projectId) : undefined))
        .orderBy(asc(projectMembers.createdAt));
      return new Map(rows.map((row) => [row.projectId, p.kind === "apikey" ? weaker(row.role, p.role) : row.role]));
    })();
    return this.roles;
  }

  /**
   * Where something new goes when the caller names no project: the first it joined that it may edit in. Without
   * one, a refusal that says what to do.
   */
  async defaultProject(): Promise<string> {
    for (const projectId of await this.visibleProjects()) {
      if (atLeast(await this.roleIn(projectId), "editor")) return projectId;
    }
    throw new TRPCError({
      code: "BAD_REQUEST",
      message: "projectId: you may edit in no project yet; make a project on the Projects page, or ask a project owner to make you an editor.",
    });
  }

  private async projectExists(projectId: string): Promise<boolean> {
    return (await this.db.select({ id: projects.id }).from(projects).where(eq(projects.id, projectId))).length > 0;
  }

  /**
   * Checks that the caller holds at least `role` in the project `ref` belongs to and returns that project. An
   * object that does not exist, or that the caller may not see, answers NOT_FOUND in the same words; a member whose
   * role is too weak hears which role it takes (FORBIDDEN). A link holder passes only `shared` reads of its runs.
   */
  async require(role: ProjectRole, ref: { kind: ObjectKind; id: string }, options: { shared?: boolean } = {}): Promise<{ projectId: string }> {
    const p = this.principal;
    const notFound = () => new TRPCError({ code: "NOT_FOUND", message: `No ${NOUN[ref.kind]} with id '${ref.id}'` });
    if (p.kind === "share") {
      if (options.shared && role === "viewer" && ref.kind === "run" && p.runIds.includes(ref.id)) return { projectId: p.projectId };
      throw options.shared ? notFound() : new TRPCError({ code: "FORBIDDEN", message: "A share link opens only the view it names; sign in to do more." });
    }
    const projectId = await projectOf(this.db, ref);
    if (projectId === null) throw notFound();
    // The local user owns every project, and the project of an object found exists (its foreign key): no second
    // lookup. Others' roles are read.
    const held = p.kind === "local" ? "owner" : await this.roleIn(projectId);
    if (held === null) throw notFound();
    if (!atLeast(held, role)) {
      throw new TRPCError({
        code: "FORBIDDEN",
        message: `Your role in this project is ${held}${p.kind === "apikey" ? " (through this API key)" : ""}; ${ROLE_NEEDED[role]} needs ${role} or above. Ask a project owner.`,
      });
    }
    return { projectId };
  }

  /** Whether the caller may read a run: a member of its project, or the holder of a share link naming it. */
  readonly mayReadRun = (runId: string): Promise<boolean> => this.may("viewer", { kind: "run", id: runId }, { shared: true });

  /** Whether `require` would pass: for what a caller is shown only when it may read it (a run named in a lineage). */
  async may(role: ProjectRole, ref: { kind: ObjectKind; id: string }, options: { shared?: boolean } = {}): Promise<boolean> {
    try {
      await this.require(role, ref, options);
      return true;
    } catch (error) {
      if (error instanceof TRPCError) return false;
      throw error;
    }
  }
}

/** The project an object belongs to, or null when there is no such object. */
export async function projectOf(db: Database, ref: { kind: ObjectKind; id: string }): Promise<string | null> {
  const one = async (rows: Promise<{ projectId: string }[]>) => (await rows)[0]?.projectId ?? null;
  switch (ref.kind) {
    case "project":
      return one(db.select({ projectId: projects.id }).from(projects).where(eq(projects.id, ref.id)));
    case "experiment":
      return one(db.select({ projectId: experiments.projectId }).from(experiments).where(eq(experiments.id, ref.id)));
    case "run":
      return one(db.select({ projectId: runs.projectId }).from(runs).where(eq(runs.id, ref.id)));
    case "checkpoint":
      return one(db.select({ projectId: runs.projectId }).from(checkpoints).innerJoin(runs, eq(runs.id, checkpoints.runId)).where(eq(checkpoints.id, ref.id)));
    case "dataset":
      return one(db.select({ projectId: datasets.projectId }).from(datasets).where(eq(datasets.id, ref.id)));
    case "shareLink":
      return one(db.select({ projectId: shareLinks.projectId }).from(shareLinks).where(eq(shareLinks.id, ref.id)));
    case "invitation":
      return one(db.select({ projectId: projectInvitations.projectId }).from(projectInvitations).where(eq(projectInvitations.id, ref.id)));
    case "report":
      return one(db.select({ projectId: reports.projectId }).from(reports).where(eq(reports.id, ref.id)));
  }
}
