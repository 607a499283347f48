import { randomBytes } from "node:crypto";

/** A short id for a failure, which the client sees in place of its details and the server's log shows with them. */
export function newErrorId(): string {
  return `err_${randomBytes(4).toString("hex")}`;
}
