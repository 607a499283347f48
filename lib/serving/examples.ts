/**
 * How to call a served model (docs/SERVING.md): the endpoint, its model name, and two copyable examples, a curl
 * command and the `openai` npm client. One text for the workbench's "Serve" panel and `tinkerlab serve`.
 */
export type ServingExamples = { endpoint: string; model: string; curl: string; node: string };

/** `serverUrl`: the server's address as the caller reaches it (http://localhost:3000). */
export function servingExamples(serverUrl: string, model: string): ServingExamples {
  const endpoint = `${serverUrl.replace(/\/$/, "")}/v1`;
  const body = JSON.stringify({ model, messages: [{ role: "user", content: "2+3=" }], max_tokens: 16 });
  const curl = [
    `curl ${endpoint}/chat/completions \\`,
    `  -H "Authorization: Bearer $TINKERLAB_API_KEY" \\`,
    `  -H "Content-Type: application/json" \\`,
    `  -d '${body}'`,
  ].join("\n");
  const node = [
    `import OpenAI from "openai";`,
    ``,
    `const client = new OpenAI({`,
    `  baseURL: "${endpoint}",`,
    `  apiKey: process.env.TINKERLAB_API_KEY,`,
    `});`,
    `const reply = await client.chat.completions.create({`,
    `  model: "${model}",`,
    `  messages: [{ role: "user", content: "2+3=" }],`,
    `  max_tokens: 16,`,
    `});`,
    `console.log(reply.choices[0].message.content);`,
  ].join("\n");
  return { endpoint, model, curl, node };
}
