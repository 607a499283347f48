/**
 * The scheduler's pure half: the resource model, the placement policy, the simulator and the forecast. Nothing
 * here touches the database; server/jobs carries the policy's decisions out on the live tables.
 */
export * from "./resources";
export * from "./policy";
export * from "./simulator";
export * from "./forecast";
export * from "./trace";
export * from "./trace-generator";
export * from "./load";
