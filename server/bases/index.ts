/**
 * The bases a run may start from, as files on this machine: the built-in ones (bin/make-base-models.ts) and the
 * imported Hugging Face models (ARTIFACTS_DIR/bases), their names, folders and shapes. Read by the API (to check a
 * launch fits) and by workers (to load one); no model code, so the web server's bundle stays light.
 */
export {
  baseModelDir,
  baseModelShape,
  baseNameProblem,
  baseNameRule,
  baseNames,
  builtinBaseNames,
  checkpointShape,
  importedBaseNames,
  importedBasesDir,
  importRecord,
} from "./catalog";
