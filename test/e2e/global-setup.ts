import path from "node:path";
import { buildIfStale } from "../../bin/build-if-stale.mjs";

/** Builds the workbench once for every end-to-end test (skipped when .next already holds these sources). */
export default function setup() {
  buildIfStale(path.resolve(__dirname, "../.."));
}
