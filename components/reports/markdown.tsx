import { Fragment, type ReactNode } from "react";

/**
 * A note's markdown as React elements, never as HTML: headings (`#` to `###`), bullet and numbered lists, fenced
 * code, paragraphs, and inline `code`, **bold**, *italic* and [links](https://…) (http, https and mailto only).
 * Anything else is shown as the text it is, so a note cannot inject markup or script.
 */
export function Markdown({ text }: { text: string }) {
  return <div className="space-y-2 text-sm leading-6 text-slate-700">{blocksOf(text)}</div>;
}

function blocksOf(text: string): ReactNode[] {
  const lines = text.replace(/\r\n?/g, "\n").split("\n");
  const out: ReactNode[] = [];
  let i = 0;
  while (i < lines.length) {
    const line = lines[i]!;
    const key = out.length;
    if (line.trim() === "") {
      i++;
    } else if (line.startsWith("```")) {
      const code: string[] = [];
      for (i++; i < lines.length && !lines[i]!.startsWith("```"); i++) code.push(lines[i]!);
      i++;
      out.push(
        <pre key={key} className="overflow-x-auto rounded bg-slate-50 p-2 font-mono text-xs text-slate-800">
          {code.join("\n")}
        </pre>,
      );
    } else if (/^#{1,3} /.test(line)) {
      const level = line.indexOf(" ");
      const content = inline(line.slice(level + 1));
      out.push(
        level === 1 ? (
          <h2 key={key} className="text-lg font-semibold text-slate-900">
            {content}
          </h2>
        ) : level === 2 ? (
          <h3 key={key} className="text-base font-semibold text-slate-900">
            {content}
          </h3>
        ) : (
          <h4 key={key} className="font-semibold text-slate-900">
            {content}
          </h4>
        ),
      );
      i++;
    } else if (/^\s*([-*]|\d+\.) /.test(line)) {
      const ordered = /^\s*\d+\. /.test(line);
      const items: string[] = [];
      for (; i < lines.length && /^\s*([-*]|\d+\.) /.test(lines[i]!); i++) items.push(lines[i]!.replace(/^\s*([-*]|\d+\.) /, ""));
      const children = items.map((item, n) => <li key={n}>{inline(item)}</li>);
      out.push(
        ordered ? (
          <ol key={key} className="list-decimal pl-6">
            {children}
          </ol>
        ) : (
          <ul key={key} className="list-disc pl-6">
            {children}
          </ul>
        ),
      );
    } else {
      const paragraph: string[] = [];
      for (; i < lines.length && lines[i]!.trim() !== "" && !/^(#{1,3} |```|\s*([-*]|\d+\.) )/.test(lines[i]!); i++) paragraph.push(lines[i]!);
      out.push(<p key={key}>{inline(paragraph.join(" "))}</p>);
    }
  }
  return out;
}

const INLINE = /`([^`]+)`|\*\*([^*]+)\*\*|\*([^*]+)\*|\[([^\]]+)\]\(((?:https?:\/\/|mailto:)[^)\s]+)\)/g;

function inline(text: string): ReactNode {
  const parts: ReactNode[] = [];
  let last = 0;
  for (const match of text.matchAll(INLINE)) {
    if (match.index > last) parts.push(text.slice(last, match.index));
    const [, code, bold, italic, label, href] = match;
    const key = parts.length;
    if (code !== undefined)
      parts.push(
        <code key={key} className="rounded bg-slate-100 px-1 font-mono text-xs">
          {code}
        </code>,
      );
    else if (bold !== undefined) parts.push(<strong key={key}>{bold}</strong>);
    else if (italic !== undefined) parts.push(<em key={key}>{italic}</em>);
    else
      parts.push(
        <a key={key} href={href} className="text-brand-700 underline" rel="noopener noreferrer nofollow" target="_blank">
          {label}
        </a>,
      );
    last = match.index + match[0].length;
  }
  if (last < text.length) parts.push(text.slice(last));
  return <Fragment>{parts}</Fragment>;
}
