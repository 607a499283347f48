/** Names shared by the auth module, the web server and the page proxy (kept apart so neither loads better-auth). */

/** The header the web server sets from the socket (a client's own value is replaced): rate limits count by it. */
export const CLIENT_IP_HEADER = "x-tinkerlab-client-ip";
export const COOKIE_PREFIX = "tinkerlab";
/** The session cookie of a team server (better-auth's name under our prefix). */
export const SESSION_COOKIE = `${COOKIE_PREFIX}.session_token`;
/** Pages a signed-out visitor of a team server may open (a trailing slash: every page under it): share links and invitations. */
export const PUBLIC_PAGES = ["/sign-in", "/sign-up", "/s/", "/invite/"];
/** The header carrying a share link's token (the shared pages' requests send it). */
export const SHARE_HEADER = "x-tinkerlab-share";
