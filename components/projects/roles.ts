import { type ProjectRole, projectRoles } from "@/lib/lifecycle/roles";

export type { ProjectRole };

/** The roles, weakest first: each may do what the one before it may, and more. */
export const ROLES: readonly ProjectRole[] = projectRoles;

/** What a role may do, in words, beside the controls that give it. */
export const ROLE_WORDS: Record<ProjectRole, string> = {
  viewer: "sees the project's experiments, runs and datasets",
  editor: "what a viewer does, and makes, edits, launches, stops and shares runs by link",
  owner: "what an editor does, and manages members, invitation links and the project",
};

/** The roles no stronger than `role`. */
export function rolesUpTo(role: ProjectRole): ProjectRole[] {
  return ROLES.slice(0, ROLES.indexOf(role) + 1);
}

export function atLeast(role: ProjectRole, needed: ProjectRole): boolean {
  return ROLES.indexOf(role) >= ROLES.indexOf(needed);
}
