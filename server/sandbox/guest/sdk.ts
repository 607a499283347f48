/**
 * The SDK as code inside the sandbox sees it (`import { defineEnvironment } from "tinkerlab"`): the same modules
 * the server runs natively, bundled in by esbuild, so there is one implementation of the session logic.
 * Only what is pure is offered: environments, the seeded generator and the protocol descriptions.
 */
export { defineEnvironment, EnvironmentSession } from "@/lib/sdk/environment";
export type { EnvironmentDefinition, StepOutcome, ParseResult, Tool, DatasetRow, EpisodeSummary, SessionStep, Json } from "@/lib/sdk/environment";
export { singleTurn, multiTurn, turnBased, simultaneous } from "@/lib/sdk/protocol";
export type { Protocol, ProtocolName } from "@/lib/sdk/protocol";
export { Rng, type RngState } from "@/lib/model/rng";
