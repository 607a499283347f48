/** What the workbench reads of runs (lists, one run, metrics and their live feed, rollouts, logs, checkpoints, what the playground plays); server/jobs writes them. */
export { baseCheckpoints, baseLineageOfRun, checkpointsOfProjects, checkpointsOfRun, configAsSeen } from "./checkpoints";
export { type CompareRunSeries, type CompareSeries, compareSeries, sourcesOfRuns, TOKENS_METRIC } from "./compare";
export { type DerivedKind, derivedRunsOf, sourceOfDerivedRun } from "./derived";
export { metricFrames, metricSummary } from "./feed";
export { playableRows, playableRun } from "./playable";
export { DERIVED_JOB_KINDS, runsTable, tableChoices, type TableColumn, type TableGroup, type TableResult, type TableRow } from "./table";
export { hasRolloutsAt, ROLLOUT_SPLITS, type RolloutSplit, rolloutLines, rolloutSpan } from "./rollout-lines";
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
export { leagueOfRun } from "./league";
