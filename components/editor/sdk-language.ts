/**
 * SDK-aware help inside the TypeScript editor: completions and hover docs for `defineEnvironment`'s fields, a
 * `step` outcome's fields, `rng.` methods and the names `tinkerlab` exports. Where the cursor is comes from the
 * Lezer syntax tree, so `reward` is offered inside `step`'s returned object and not elsewhere.
 */
import { type Completion, type CompletionContext, type CompletionResult, snippetCompletion } from "@codemirror/autocomplete";
import { javascriptLanguage } from "@codemirror/lang-javascript";
import { syntaxTree } from "@codemirror/language";
import type { EditorState, Extension } from "@codemirror/state";
import { EditorView, hoverTooltip } from "@codemirror/view";
import type { SyntaxNode } from "@lezer/common";
import { environmentFieldDocs, rngMethodDocs, type SdkDoc, sdkExportDocs, stepOutcomeDocs } from "./sdk-docs";

type ObjectKind = "environment" | "stepOutcome";

const tables: Record<ObjectKind | "rng" | "export", Record<string, SdkDoc>> = {
  environment: environmentFieldDocs,
  stepOutcome: stepOutcomeDocs,
  rng: rngMethodDocs,
  export: sdkExportDocs,
};

const text = (state: EditorState, node: SyntaxNode) => state.sliceDoc(node.from, node.to);

/** The object literal passed to `defineEnvironment(…)`, or one returned from its `step`, or neither. */
function objectKind(state: EditorState, object: SyntaxNode): ObjectKind | null {
  const args = object.parent;
  if (args?.name === "ArgList" && args.parent?.name === "CallExpression") {
    const callee = state.sliceDoc(args.parent.from, args.from);
    if (/(^|\.)defineEnvironment\s*(<[\s\S]*>)?\s*$/.test(callee)) return "environment";
  }
  const returned = args && (args.name === "ReturnStatement" || args.name === "ParenthesizedExpression" || args.name === "ArrowFunction");
  if (!returned) return null;
  for (let node: SyntaxNode | null = args; node; node = node.parent) {
    if (node.name !== "Property") continue;
    const name = node.getChild("PropertyDefinition");
    const owner = node.parent;
    if (name && text(state, name) === "step" && owner?.name === "ObjectExpression" && objectKind(state, owner) === "environment") return "stepOutcome";
    return null;
  }
  return null;
}

function enclosingObject(node: SyntaxNode | null): SyntaxNode | null {
  for (let n = node; n; n = n.parent) if (n.name === "ObjectExpression") return n;
  return null;
}

/** The names already given in an object literal, so completion offers only the rest. */
function givenProperties(state: EditorState, object: SyntaxNode): Set<string> {
  const names = new Set<string>();
  for (let child = object.firstChild; child; child = child.nextSibling) {
    const name = child.name === "Property" ? child.getChild("PropertyDefinition") : null;
    if (name) names.add(text(state, name));
  }
  return names;
}

const completionType: Record<SdkDoc["kind"], string> = { property: "property", method: "method", function: "function", class: "class", type: "type" };

function toCompletion(label: string, doc: SdkDoc, useSnippet: boolean): Completion {
  const completion: Completion = { label, detail: doc.detail, info: doc.doc, type: completionType[doc.kind], boost: 10 };
  return useSnippet && doc.snippet ? snippetCompletion(doc.snippet, completion) : completion;
}

function sdkCompletions(context: CompletionContext): CompletionResult | null {
  const { state, pos } = context;
  const member = context.matchBefore(/[\w$.]+\.[\w$]*$/);
  if (member) {
    const receiver = member.text.slice(0, member.text.lastIndexOf("."));
    if (!/(^|\.)rng$/i.test(receiver)) return null;
    const from = member.from + member.text.lastIndexOf(".") + 1;
    return { from, options: Object.entries(rngMethodDocs).map(([name, doc]) => toCompletion(name, doc, true)), validFor: /^[\w$]*$/ };
  }
  const word = context.matchBefore(/[\w$]*/);
  if (!word || (word.from === word.to && !context.explicit)) return null;
  const node = syntaxTree(state).resolveInner(pos, -1);
  if (node.name === "String" || node.name === "TemplateString" || node.name.includes("Comment")) return null;
  const object = enclosingObject(node);
  if (object && /[{,]\s*$/.test(state.sliceDoc(object.from, word.from))) {
    const kind = objectKind(state, object);
    if (!kind) return null;
    const given = givenProperties(state, object);
    const options = Object.entries(tables[kind])
      .filter(([name]) => !given.has(name) || name === word.text)
      .map(([name, doc]) => toCompletion(name, doc, kind === "environment"));
    return { from: word.from, options, validFor: /^[\w$]*$/ };
  }
  return { from: word.from, options: Object.entries(sdkExportDocs).map(([name, doc]) => toCompletion(name, doc, false)), validFor: /^[\w$]*$/ };
}

/** The SDK doc for the name under the pointer, judged by where the name stands. */
function sdkDocAt(state: EditorState, pos: number, side: -1 | 1): { from: number; to: number; name: string; doc: SdkDoc } | null {
  const node = syntaxTree(state).resolveInner(pos, side);
  const name = text(state, node);
  const found = (table: Record<string, SdkDoc>) => (Object.hasOwn(table, name) ? { from: node.from, to: node.to, name, doc: table[name]! } : null);
  switch (node.name) {
    case "PropertyName": {
      const receiver = state.sliceDoc(Math.max(0, node.from - 80), node.from);
      return /(^|[^\w$])rng\s*\.\s*$/i.test(receiver) ? found(rngMethodDocs) : null;
    }
    case "PropertyDefinition": {
      const object = node.parent?.name === "Property" ? node.parent.parent : null;
      const kind = object?.name === "ObjectExpression" ? objectKind(state, object) : null;
      return kind ? found(tables[kind]) : null;
    }
    case "VariableName":
    case "VariableDefinition":
    case "TypeName":
      return found(sdkExportDocs);
    default:
      return null;
  }
}

const sdkHover = hoverTooltip((view, pos, side) => {
  const hit = sdkDocAt(view.state, pos, side);
  if (!hit) return null;
  return {
    pos: hit.from,
    end: hit.to,
    above: true,
    create() {
      const dom = document.createElement("div");
      dom.className = "cm-sdk-doc";
      const signature = document.createElement("code");
      signature.className = "cm-sdk-doc-signature";
      signature.textContent = hit.doc.detail.startsWith(hit.name) ? hit.doc.detail : `${hit.name}: ${hit.doc.detail}`;
      const body = document.createElement("p");
      body.textContent = hit.doc.doc;
      dom.append(signature, body);
      return { dom };
    },
  };
});

const sdkTheme = EditorView.baseTheme({
  ".cm-sdk-doc": { maxWidth: "28rem", padding: "6px 8px", fontFamily: "var(--font-sans)", fontSize: "12px", lineHeight: "1.45" },
  ".cm-sdk-doc-signature": { display: "block", fontFamily: "var(--font-mono)", fontSize: "11.5px", color: "#2f45b5", marginBottom: "4px" },
  ".cm-sdk-doc p": { margin: "0", color: "#334155" },
});

/** Completions and hover docs for the SDK, added beside the TypeScript language's own completions. */
export function sdkAssist(): Extension {
  return [javascriptLanguage.data.of({ autocomplete: sdkCompletions }), sdkHover, sdkTheme];
}
