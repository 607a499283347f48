/** What the workbench reads of runs (lists, one run, metrics, rollouts, logs); server/jobs writes them. */
export {
  listRuns,
  logsAfter,
  metricPointsAfter,
  metricRange,
  projectOfRun,
  promptAcrossSteps,
  requireRun,
  rolloutsOfStep,
  type RunFilters,
} from "./read";
