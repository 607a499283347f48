import { checkpointsRouter } from "./routers/checkpoints";
import { datasetsRouter } from "./routers/datasets";
import { experimentsRouter } from "./routers/experiments";
import { healthRouter } from "./routers/health";
import { runsRouter } from "./routers/runs";
import { schedulerRouter } from "./routers/scheduler";
import { workerRouter } from "./routers/worker";
import { createCallerFactory, createTRPCRouter } from "./trpc";

export const appRouter = createTRPCRouter({
  health: healthRouter,
  experiments: experimentsRouter,
  runs: runsRouter,
  checkpoints: checkpointsRouter,
  datasets: datasetsRouter,
  scheduler: schedulerRouter,
  worker: workerRouter,
});

export type AppRouter = typeof appRouter;

/** Calls procedures in-process, e.g. `createCaller(createContextInner({...})).runs.list()`. */
export const createCaller = createCallerFactory(appRouter);
