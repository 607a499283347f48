"use client";

import { json, jsonParseLinter } from "@codemirror/lang-json";
import { javascript } from "@codemirror/lang-javascript";
import { type Diagnostic, lintGutter, linter, setDiagnostics } from "@codemirror/lint";
import { Annotation, EditorState, type Extension, type Text } from "@codemirror/state";
import { EditorView } from "@codemirror/view";
import { basicSetup } from "codemirror";
import { useEffect, useRef } from "react";
import { sdkAssist } from "./sdk-language";

/** A problem in one file as `experiments.validate` reports it: 1-based line and column, either possibly unknown. */
export type EditorDiagnostic = { severity: "error" | "warning" | "info"; message: string; line: number | null; column: number | null; source: string };

/** Marks changes that came from the `value` prop, so they are not echoed back through `onChange`. */
const external = Annotation.define<boolean>();

const theme = EditorView.theme({
  "&": { height: "100%", fontSize: "13px", backgroundColor: "#fff" },
  ".cm-scroller": { fontFamily: "var(--font-mono)", lineHeight: "1.55" },
  ".cm-gutters": { backgroundColor: "#f8fafc", borderRight: "1px solid #e2e8f0", color: "#94a3b8" },
  ".cm-activeLineGutter": { backgroundColor: "#eef4ff" },
  ".cm-activeLine": { backgroundColor: "#f8faff" },
  "&.cm-focused": { outline: "none" },
});

/** Where a 1-based line and column fall in the document, widened to the word there so the underline shows. */
function diagnosticRange(doc: Text, line: number | null, column: number | null): { from: number; to: number } {
  if (line === null || doc.length === 0) return { from: 0, to: Math.min(doc.length, doc.line(1).length) };
  const at = doc.line(Math.min(Math.max(line, 1), doc.lines));
  let from = Math.min(at.from + Math.max((column ?? 1) - 1, 0), at.to);
  if (from === at.to && at.length > 0) from -= 1;
  const rest = doc.sliceString(from, at.to);
  const word = /^[\w$]+/.exec(rest)?.[0].length ?? (column === null ? at.length : 1);
  return { from, to: Math.min(from + word, at.to) };
}

function toCodeMirror(doc: Text, diagnostics: readonly EditorDiagnostic[]): Diagnostic[] {
  return diagnostics.map((d) => ({ ...diagnosticRange(doc, d.line, d.column), severity: d.severity, message: d.message, source: d.source }));
}

type Props = {
  /** Which document this is; each keeps its own undo history while the editor lives. */
  path: string;
  value: string;
  onChange(value: string): void;
  language: "typescript" | "json";
  diagnostics?: readonly EditorDiagnostic[];
  label: string;
  /** Moves the cursor to this place and focuses the editor; a new object each time it should happen. */
  reveal?: { line: number | null; column: number | null } | null;
  className?: string;
  /** Shown, selectable and searchable, but not editable (an old version). */
  readOnly?: boolean;
};

/** CodeMirror 6 with TypeScript (and SDK help) or JSON, lint gutter and underlines from the given diagnostics. */
export function CodeEditor({ path, value, onChange, language, diagnostics = [], label, reveal = null, className = "", readOnly = false }: Props) {
  const host = useRef<HTMLDivElement>(null);
  const view = useRef<EditorView | null>(null);
  const states = useRef(new Map<string, EditorState>());
  const shownPath = useRef<string | null>(null);
  const createState = useRef<(doc: string) => EditorState>(null);
  const onChangeRef = useRef(onChange);
  useEffect(() => {
    onChangeRef.current = onChange;
  });

  // biome-ignore lint/correctness/useExhaustiveDependencies: the view is made once per language; path and value changes are applied by the effects below
  useEffect(() => {
    const languageExtensions: Extension =
      language === "typescript" ? [javascript({ typescript: true }), sdkAssist()] : [json(), linter(jsonParseLinter(), { delay: 300 })];
    const extensions: Extension[] = [
      basicSetup,
      languageExtensions,
      lintGutter(),
      theme,
      // Long lines wrap: the editor shares the page with the validation panel, and sideways scrolling hides code.
      EditorView.lineWrapping,
      EditorView.contentAttributes.of({ "aria-label": label }),
      EditorState.readOnly.of(readOnly),
      EditorView.editable.of(!readOnly),
      EditorView.updateListener.of((update) => {
        if (update.docChanged && !update.transactions.some((tr) => tr.annotation(external))) onChangeRef.current(update.state.doc.toString());
      }),
    ];
    const create = (doc: string) => EditorState.create({ doc, extensions });
    const editor = new EditorView({ parent: host.current!, state: create(value) });
    view.current = editor;
    shownPath.current = path;
    createState.current = create;
    const saved = states.current;
    return () => {
      saved.clear();
      editor.destroy();
      view.current = null;
    };
  }, [language, label, readOnly]);

  useEffect(() => {
    const editor = view.current;
    if (!editor || !createState.current || shownPath.current === path) return;
    if (shownPath.current !== null) states.current.set(shownPath.current, editor.state);
    const kept = states.current.get(path);
    editor.setState(kept && kept.doc.toString() === value ? kept : createState.current(value));
    shownPath.current = path;
  }, [path, value]);

  useEffect(() => {
    const editor = view.current;
    if (!editor || editor.state.doc.toString() === value) return;
    editor.dispatch({ changes: { from: 0, to: editor.state.doc.length, insert: value }, annotations: external.of(true) });
  }, [value]);

  // biome-ignore lint/correctness/useExhaustiveDependencies: a new file's view needs its diagnostics again, though they may be equal
  useEffect(() => {
    const editor = view.current;
    if (!editor || language !== "typescript") return;
    editor.dispatch(setDiagnostics(editor.state, toCodeMirror(editor.state.doc, diagnostics)));
  }, [diagnostics, path, language]);

  useEffect(() => {
    const editor = view.current;
    if (!editor || !reveal) return;
    const { from } = diagnosticRange(editor.state.doc, reveal.line, reveal.column);
    editor.dispatch({ selection: { anchor: from }, effects: EditorView.scrollIntoView(from, { y: "center" }) });
    editor.focus();
  }, [reveal]);

  return <div ref={host} className={`h-full min-h-0 overflow-hidden ${className}`} data-editor-path={path} />;
}
