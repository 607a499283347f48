/**
 * Who a request is and what it may touch (docs/AUTH.md): the principal and the one per-object check, projects and
 * members, share links, API keys, hashed tokens, and a team server's accounts. `./constants` is the entry for code
 * that runs in the browser or Next's proxy (header and cookie names, public pages).
 */
export {
  Access,
  atLeast,
  isServerAdmin,
  type ObjectKind,
  type Principal,
  projectOf,
  serverAdminRefusal,
  SHARE_LINKS_DOWNLOAD_NO_FILES,
  type User,
  weaker,
} from "./access";
export { accountsFor, type Accounts, MIN_PASSWORD_LENGTH } from "./accounts";
export { createApiKey, listApiKeys, principalForApiKey, revokeApiKey } from "./api-keys";
export { CLIENT_IP_HEADER, SHARE_HEADER } from "./constants";
export {
  acceptInvitation,
  createInvitation,
  createProject,
  DEFAULT_PROJECT,
  findInvitation,
  listInvitations,
  listMembers,
  projectsOf,
  removeMember,
  renameProject,
  requireProject,
  revokeInvitation,
  setMember,
} from "./projects";
export { type AuthMode, authenticate, signInMessage } from "./request";
export { announceRevocation } from "./revocation";
export { authSecret, authSecretFile } from "./secret";
export {
  createShareLink,
  LINK_GONE,
  listedShareLink,
  listReportLinks,
  listShareLinks,
  openShareLink,
  principalForShareToken,
  reportOfLink,
  retargetReportLinks,
  revokeReportLinks,
  revokeShareLink,
  shareReport,
  shareRuns,
} from "./share-links";
export { RECHECK_MS, runAccessLost, watchRunAccess } from "./stream-access";
export { daysFromNow, hashToken, looksLikeToken, newToken } from "./tokens";
