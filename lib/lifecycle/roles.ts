/** A member's role in a project, weakest first: each may do what the one before it may, and more (docs/AUTH.md). */
export const projectRoles = ["viewer", "editor", "owner"] as const;
export type ProjectRole = (typeof projectRoles)[number];
