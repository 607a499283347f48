import type { inferRouterOutputs } from "@trpc/server";
import type { AppRouter } from "@/server/api";

type Outputs = inferRouterOutputs<AppRouter>;

type Project = Outputs["projects"]["byId"];
export type Member = Outputs["projects"]["members"][number];
export type Invitation = Outputs["projects"]["invitations"][number];
export type ShareLink = Outputs["shareLinks"]["ofProject"][number];

/** What the project page's server component loads for its first render. */
export type ProjectPageData = { project: Project; members: Member[]; shareLinks: ShareLink[]; invitations: Invitation[] | null };
