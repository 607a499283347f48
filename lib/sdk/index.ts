/** The SDK a user writes experiments against: environments, agents, protocols and experiments. */
export { defineEnvironment, EnvironmentSession } from "./environment";
export type { EnvironmentDefinition, StepOutcome, ParseResult, Tool, DatasetRow, EpisodeSummary, SessionStep, Json } from "./environment";
export { defineAgent, agentSchema, loraTargets, type AgentConfig, type AgentConfigInput } from "./agent";
export { singleTurn, multiTurn, turnBased, runEpisodes } from "./protocol";
export type { Protocol, ProtocolName, Trajectory, Turn, ActRequest, ActResponse, EpisodeStart } from "./protocol";
export { defineExperiment, experimentSchema, algorithmSchema, algorithmNames, policyLosses, lrSchedules, learningRateAt } from "./experiment";
export type { ExperimentConfig, ExperimentConfigInput, AlgorithmConfig, AlgorithmName } from "./experiment";
export { Rng } from "@/lib/model/rng";
