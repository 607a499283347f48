/**
 * `tinkerlab serve <model>`: makes sure a worker serves a model through the server's OpenAI-compatible endpoint
 * (a base, a checkpoint id or run_…:latest), waiting while it loads, then prints the endpoint, the model name and
 * the examples the workbench's "Serve" panel shows (lib/serving/examples.ts).
 */
import { servingExamples } from "../../lib/serving/examples";
import { CliError, EXIT, type GlobalOptions, printJson, resolveServer } from "./context";

type ServeOptions = GlobalOptions & { wait?: boolean; timeout?: string };

export async function serve(model: string, options: ServeOptions) {
  const { url, apiKey } = resolveServer(options);
  const timeoutS = Number(options.timeout ?? 120);
  if (!Number.isFinite(timeoutS) || timeoutS <= 0) throw new CliError(`--timeout must be a number of seconds above 0; got ${options.timeout}`, EXIT.usage);
  const examples = servingExamples(url, model);
  const until = Date.now() + timeoutS * 1000;
  let ready = false;
  let loading = "";
  for (;;) {
    // A one-token completion: it starts the model's serving job if none runs, and answers once one does.
    let response: Response;
    try {
      response = await fetch(`${examples.endpoint}/completions`, {
        method: "POST",
        headers: { "content-type": "application/json", ...(apiKey ? { authorization: `Bearer ${apiKey}` } : {}) },
        body: JSON.stringify({ model, prompt: "a", max_tokens: 1 }),
      });
    } catch (error) {
      throw new CliError(`cannot reach ${url}: ${(error as Error).message}`, EXIT.unreachable);
    }
    if (response.ok) {
      ready = true;
      break;
    }
    const body = (await response.json().catch(() => ({}))) as { error?: { message?: string; code?: string } };
    const message = body.error?.message ?? `${response.status} ${response.statusText}`;
    if (response.status !== 503) throw new CliError(message, EXIT.refused);
    if (!options.json && message !== loading) console.error(message);
    loading = message;
    if (options.wait === false) break;
    if (Date.now() >= until) throw new CliError(`the model is still loading after ${timeoutS} s: ${message}`, EXIT.refused);
    const retryAfter = Number(response.headers.get("retry-after") ?? 2);
    await new Promise((resolve) => setTimeout(resolve, Math.max(0.5, retryAfter) * 1000));
  }
  if (options.json) {
    printJson({ ...examples, ready });
    return;
  }
  console.log(`${ready ? "Serving" : "Starting to serve"} ${model} at ${examples.endpoint}`);
  console.log(`  model: ${model}`);
  console.log(`  key:   send a project API key as 'Authorization: Bearer tl_…' (TINKERLAB_API_KEY below)`);
  console.log("\ncurl:\n");
  console.log(examples.curl);
  console.log("\nopenai (npm):\n");
  console.log(examples.node);
}
