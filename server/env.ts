import { z } from "zod";

/**
 * The one place that reads `process.env`. Every variable is validated here, and a bad configuration stops the
 * process with one message that lists each wrong variable, what it held and what is accepted.
 */
const postgresUrl = z
  .string()
  .trim()
  .refine(
    (value) => {
      try {
        const url = new URL(value);
        return (url.protocol === "postgres:" || url.protocol === "postgresql:") && url.hostname !== "";
      } catch {
        return false;
      }
    },
    { message: "must be a URL like postgres://user:password@host:5432/dbname" },
  );

const emptyAsUndefined = (value: unknown) => (value === "" ? undefined : value);

export const serverEnvSchema = z.object({
  NODE_ENV: z.enum(["development", "production", "test"]).default("development"),
  DATABASE_URL: z
    .preprocess(emptyAsUndefined, postgresUrl.optional())
    .describe("PostgreSQL server to use; unset = the embedded PGlite database in PGLITE_DATA_DIR"),
  PGLITE_DATA_DIR: z
    .string()
    .min(1)
    .default("./.data/db")
    .describe("folder of the embedded database (used when DATABASE_URL is unset)"),
  ARTIFACTS_DIR: z.string().min(1).default("./.data/artifacts").describe("folder for checkpoints and exports"),
  PORT: z.coerce
    .number({ message: "must be a whole number between 1 and 65535" })
    .int("must be a whole number between 1 and 65535")
    .min(1, "must be a whole number between 1 and 65535")
    .max(65535, "must be a whole number between 1 and 65535")
    .default(3000),
  HOST: z.string().min(1).default("127.0.0.1").describe("interface the web server listens on"),
  TINKERLAB_BACKEND: z
    .enum(["auto", "node-gpu", "node", "wasm", "cpu"])
    .default("auto")
    .describe("training backend; auto tries node-gpu, node, wasm, then cpu"),
  TINKERLAB_AUTH: z
    .enum(["local", "apikey"])
    .default("local")
    .describe("local: every browser is the local user; apikey: every request needs an API key"),
  TEST_DATABASE_URL: z.preprocess(emptyAsUndefined, postgresUrl.optional()),
  TINKERLAB_TEST_DB: z.enum(["pglite", "postgres"]).default("pglite"),
});

export type ServerEnv = z.infer<typeof serverEnvSchema>;

/** Thrown when the environment is invalid; its message lists every bad variable. */
export class ConfigError extends Error {
  override name = "ConfigError";
}

export function parseServerEnv(source: Record<string, string | undefined>): ServerEnv {
  const result = serverEnvSchema.safeParse(source);
  if (result.success) return result.data;
  const lines = result.error.issues.map((issue) => {
    const key = String(issue.path[0]);
    const given = source[key];
    return `  ${key}=${given === undefined ? "(unset)" : JSON.stringify(given)}: ${issue.message}`;
  });
  throw new ConfigError(`Invalid configuration:\n${lines.join("\n")}`);
}

let cached: ServerEnv | undefined;

/** The validated server environment, parsed once per process. */
export function serverEnv(): ServerEnv {
  cached ??= parseServerEnv(process.env);
  return cached;
}
