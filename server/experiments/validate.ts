import { TRPCError } from "@trpc/server";
import { datasetFiles } from "../datasets";
import { isCheckpointBase, resolveBase } from "../jobs";
import type { ValidationReport } from "../sandbox";
import { ValidationBusyError, validateReusing } from "../validation";
import { baseModelShape, checkpointShape } from "../bases";
import type { Caller } from "./caller";
import { hasSeveralAgents, type ProtocolName } from "@/lib/sdk/protocol";

/** The agents a dry run plays: only a protocol with several agents is sent, so one agent's validations stay as they were. */
export type ValidationProtocol = { name: ProtocolName; agents: string[] };

/**
 * The protocol validation plays for a config's protocol: its agents when it has several, else none (the dry run plays
 * one agent). The editor and a launch both ask through this, so the same config gives the same validation (reused).
 */
export function validationProtocol(protocol: { name: ProtocolName; agents: string[] } | undefined): ValidationProtocol | undefined {
  return protocol && hasSeveralAgents(protocol) ? { name: protocol.name, agents: [...protocol.agents] } : undefined;
}

/** How the editor validates (experiments.validate's defaults); `runs.launch` validates a version so too. */
export const editorValidation = { episodes: 3, typeCheck: true, maxTokens: 32 } as const;

/**
 * Validates source files in a validation process, with the datasets of the project they belong to and, when the
 * base is known, its context length (the first prompt must leave `maxTokens` of it). The editor's validations and
 * `runs.launch`'s go through here, so that the same source, base and reply length give the same report, reused
 * (`validateReusing`) when a launch follows its validation.
 */
export async function validateSource(
  caller: Pick<Caller, "db" | "access">,
  projectId: string,
  files: Record<string, string>,
  options: {
    entry?: string;
    episodes?: number;
    typeCheck?: boolean;
    base?: string;
    maxTokens?: number;
    /** The experiment's protocol when it has several agents: the dry run plays them (see `validationProtocol`). */
    protocol?: ValidationProtocol;
  },
): Promise<ValidationReport> {
  const maxTokens = options.maxTokens ?? editorValidation.maxTokens;
  let context;
  if (options.base) {
    try {
      // Another project's checkpoint is as unknown here as anywhere (the catch below leaves the context out).
      if (isCheckpointBase(options.base)) await caller.access.require("viewer", { kind: "checkpoint", id: options.base });
      const base = await resolveBase(caller.db, options.base);
      const shape = base.kind === "builtin" ? baseModelShape(base.name) : checkpointShape(base.path);
      context = { base: options.base, contextLength: shape.contextLength, maxTokens };
    } catch {
      // an unknown base is the config form's error to show; the source is still validated
    }
  }
  try {
    return await validateReusing(files, {
      entry: options.entry,
      episodes: options.episodes ?? editorValidation.episodes,
      typeCheck: options.typeCheck ?? editorValidation.typeCheck,
      context,
      ...(options.protocol ? { protocol: options.protocol } : {}),
      datasetFiles: await datasetFiles(caller.db, projectId),
    });
  } catch (error) {
    // A full queue says when to retry (the cause's retryAfterS becomes a Retry-After header, server/api/rate-limits.ts).
    if (error instanceof ValidationBusyError) throw new TRPCError({ code: "TOO_MANY_REQUESTS", message: error.message, cause: error });
    // The validation's own failures (it overran its time, its process stopped) are the user's to act on.
    throw new TRPCError({ code: "UNPROCESSABLE_CONTENT", message: (error as Error).message, cause: error });
  }
}
