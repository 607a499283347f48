import { apiKeysRouter } from "./routers/api-keys";
import { checkpointsRouter } from "./routers/checkpoints";
import { compareRouter } from "./routers/compare";
import { datasetsRouter } from "./routers/datasets";
import { derivedRouter } from "./routers/derived";
import { experimentsRouter } from "./routers/experiments";
import { healthRouter } from "./routers/health";
import { leagueRouter } from "./routers/league";
import { projectsRouter } from "./routers/projects";
import { reportsRouter } from "./routers/reports";
import { runsRouter } from "./routers/runs";
import { schedulerRouter } from "./routers/scheduler";
import { sessionsRouter } from "./routers/sessions";
import { shareLinksRouter } from "./routers/share-links";
import { workerRouter } from "./routers/worker";
import { createCallerFactory, createTRPCRouter } from "./trpc";

export const appRouter = createTRPCRouter({
  health: healthRouter,
  experiments: experimentsRouter,
  runs: runsRouter,
  compare: compareRouter,
  checkpoints: checkpointsRouter,
  datasets: datasetsRouter,
  scheduler: schedulerRouter,
  worker: workerRouter,
  projects: projectsRouter,
  shareLinks: shareLinksRouter,
  apiKeys: apiKeysRouter,
  sessions: sessionsRouter,
  derived: derivedRouter,
  reports: reportsRouter,
  league: leagueRouter,
});

export type AppRouter = typeof appRouter;

/** Calls procedures in-process, e.g. `createCaller(createContextInner({...})).runs.list()`. */
export const createCaller = createCallerFactory(appRouter);
