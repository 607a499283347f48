/** A member's role in a project, weakest first: each may do what the one before it may, and more (docs/AUTH.md). */
export const projectRoles = ["viewer", "editor", "owner"] as const;
export type ProjectRole = (typeof projectRoles)[number];

/**
 * The role an API key is made with: a project role, or "admin", which is its project's owner and also acts for the
 * whole server (importing a base) while its maker is the server's admin. Only the admin makes admin keys.
 */
export const apiKeyRoles = [...projectRoles, "admin"] as const;
export type ApiKeyRole = (typeof apiKeyRoles)[number];
