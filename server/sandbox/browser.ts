/**
 * The sandbox's second entry point, for code that runs in a browser (the playground's episode player,
 * components/episode): only the parts with no Node.js in them, which the server's sandbox uses too. The QuickJS
 * engine (its CPU clock is the wall clock there), the wire format between host and guest, and the checks every
 * answer of the guest gets. Everything else comes through ./index.ts.
 */
export { AnswerReader, checkDescription, checkSummary, finite, type SandboxedSummary } from "./answers";
export { defaultSandboxLimits, type SandboxLimits } from "./limits";
export { QuickJSEngine } from "./quickjs-engine";
export { type EnvironmentDescription, type GuestEpisodeEnd, type GuestFailure, type GuestOp, encodeRequest, FAILED } from "./wire";
