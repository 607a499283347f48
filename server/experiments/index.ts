/**
 * Experiments: their versions (source files and a parsed config), the built-in examples, validation of their
 * source, and launching runs of them or of their runs' checkpoints. The experiments and runs routers call these.
 */
export { baseShapeFor } from "./base-shape";
export type { Caller } from "./caller";
export { EXAMPLE_ENTRY, exampleSource } from "./example-source";
export { ensureExampleExperiments } from "./examples";
export { launchExperiment, queueFromCheckpoint, relaunchRun, validateAhead } from "./launch";
export {
  cloneRunAsVersion,
  createExperiment,
  listExperiments,
  listVersions,
  projectOfExperiment,
  renameExperiment,
  requireExperiment,
  requireVersion,
  savedVersion,
  saveVersion,
  type SourceFiles,
} from "./store";
export { editorValidation, validateSource, validationProtocol, type ValidationProtocol } from "./validate";
