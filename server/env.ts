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
  PGLITE_DATA_DIR: z.string().min(1).default("./.data/db").describe("folder of the embedded database (used when DATABASE_URL is unset)"),
  ARTIFACTS_DIR: z.string().min(1).default("./.data/artifacts").describe("folder for checkpoints and exports"),
  PORT: z.coerce
    .number({ message: "must be a whole number between 1 and 65535" })
    .int("must be a whole number between 1 and 65535")
    .min(1, "must be a whole number between 1 and 65535")
    .max(65535, "must be a whole number between 1 and 65535")
    .default(3000),
  HOST: z.string().min(1).default("127.0.0.1").describe("interface the web server listens on"),
  TINKERLAB_BACKEND: z
    .enum(["auto", "js", "node-gpu", "node", "wasm", "cpu"])
    .default("auto")
    .describe("training backend; auto takes node-gpu where it loads and sees a GPU, else the TypeScript engine (js)"),
  TINKERLAB_KERNEL: z
    .enum(["auto", "native", "wasm"])
    .default("auto")
    .describe(
      "matrix kernel of the js backend; auto takes the native one (AVX-512/AVX2, compiled with g++ on first use) where it builds, else WebAssembly SIMD",
    ),
  TINKERLAB_AUTH: z
    .enum(["local", "apikey", "team"], "must be local, apikey or team")
    .default("local")
    .describe("local: every browser is the local user; apikey: every request needs an API key; team: people sign in (email and password), or send an API key"),
  TINKERLAB_AUTH_SECRET: z
    .string()
    .min(32, "must be at least 32 characters")
    .optional()
    .describe("team mode: the secret that signs session cookies; unset: the one in TINKERLAB_AUTH_SECRET_FILE (made at first start), never in the database"),
  TINKERLAB_AUTH_SECRET_FILE: z
    .string()
    .min(1)
    .optional()
    .describe("team mode without TINKERLAB_AUTH_SECRET: the file (mode 0600) holding the cookie-signing secret; unset: auth-secret beside PGLITE_DATA_DIR"),
  TINKERLAB_WORKER_TOKEN: z
    .string()
    .min(16, "must be at least 16 characters")
    .optional()
    .describe("shared secret workers present to the server; unset: the server makes one for its local workers"),
  TINKERLAB_SERVER_URL: z.url({ message: "must be a URL like http://host:3000" }).optional().describe("the server a `tinkerlab worker` joins"),
  TINKERLAB_LOCAL_WORKERS: z.coerce
    .number({ message: "must be a whole number from 0 to 16" })
    .int("must be a whole number from 0 to 16")
    .min(0, "must be a whole number from 0 to 16")
    .max(16, "must be a whole number from 0 to 16")
    .default(1)
    .describe("worker processes the server starts on this machine"),
  TINKERLAB_SERVE_IDLE_S: z.coerce
    .number({ message: "must be a whole number of seconds from 5 to 86400" })
    .int("must be a whole number of seconds from 5 to 86400")
    .min(5, "must be a whole number of seconds from 5 to 86400")
    .max(86_400, "must be a whole number of seconds from 5 to 86400")
    .default(300)
    .describe("a serving job (the /v1 endpoints) with no request for this long ends, freeing its place; the next request starts it again"),
  TINKERLAB_WORKER_MEMORY_SHARE: z.coerce
    .number({ message: "must be a number from 0.01 to 1" })
    .min(0.01, "must be a number from 0.01 to 1")
    .max(1, "must be a number from 0.01 to 1")
    .default(1)
    .describe("share of this machine's memory a worker offers (set by the server for its local workers)"),
  TINKERLAB_VALIDATION_PROCESSES: z.coerce
    .number({ message: "must be a whole number from 1 to 16" })
    .int("must be a whole number from 1 to 16")
    .min(1, "must be a whole number from 1 to 16")
    .max(16, "must be a whole number from 1 to 16")
    .default(2)
    .describe("validation processes the server runs at most (editor validations at once)"),
  TINKERLAB_WORKER_SLOTS: z.coerce
    .number({ message: "must be a whole number from 1 to 256" })
    .int("must be a whole number from 1 to 256")
    .min(1, "must be a whole number from 1 to 256")
    .max(256, "must be a whole number from 1 to 256")
    .optional()
    .describe("jobs a worker runs at once (compute slots); unset: one per core of its share of the machine"),
  TINKERLAB_WORKER_EXIT_WITH_PARENT: z
    .enum(["on", "off"], "must be on or off")
    .default("off")
    .describe("on (set by the server for its local workers): the worker leaves when its standard input closes, i.e. the server that started it is gone"),
  TINKERLAB_MAX_JOB_FLOPS: z.coerce
    .number({ message: "must be a number of floating-point operations, e.g. 1e16" })
    .positive("must be a number of floating-point operations above 0, e.g. 1e16")
    .default(1e16)
    .describe("the most arithmetic one job may cost (its episodes × turns × tokens, and tokens trained on, on its model); a job over it is refused at launch"),
  TINKERLAB_MAX_WORKER_LOSSES: z.coerce
    .number({ message: "must be a whole number from 1 to 100" })
    .int("must be a whole number from 1 to 100")
    .min(1, "must be a whole number from 1 to 100")
    .max(100, "must be a whole number from 1 to 100")
    .default(3)
    .describe("a job that loses its worker this many times in a row, its run getting no further in between, fails"),
  TINKERLAB_BASES_DIR: z.string().min(1).default("./lib/envs/bases").describe("folder of the built-in base models, one checkpoint folder per base"),
  TINKERLAB_EXAMPLES: z
    .enum(["on", "off"], "must be on or off")
    .default("on")
    .describe("on: add the built-in use cases as example experiments at start (once)"),
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
