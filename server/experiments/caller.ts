import type { Access, User } from "../auth";
import type { Database } from "../db";

/** Who asks, as the API's context knows it: the database, what the caller may touch, and who it is. */
export type Caller = { db: Database; access: Access; user: User };
