/**
 * A report's notes render markdown as React elements: headings, lists, code, emphasis and links, with any HTML in
 * the note shown as text and only http(s) and mailto links made links.
 */
import { createElement } from "react";
import { renderToStaticMarkup } from "react-dom/server";
import { describe, expect, it } from "vitest";
import { Markdown } from "@/components/reports/markdown";

const render = (text: string) => renderToStaticMarkup(createElement(Markdown, { text }));

describe("a note's markdown", () => {
  it("renders headings, lists, paragraphs, code and emphasis", () => {
    const html = render("# Findings\n\nSeed 1 is **ahead**, see `reward/mean`.\n\n- first\n- *second*\n\n1. one\n2. two\n\n```\nconst x = 1;\n```");
    expect(html).toContain(">Findings</h2>");
    expect(html).toContain("<strong>ahead</strong>");
    expect(html).toContain(">reward/mean</code>");
    expect(html).toMatch(/<ul[^>]*><li>first<\/li><li><em>second<\/em><\/li><\/ul>/);
    expect(html).toMatch(/<ol[^>]*><li>one<\/li><li>two<\/li><\/ol>/);
    expect(html).toContain(">const x = 1;</pre>");
  });

  it("shows HTML as text and links only http, https and mailto addresses", () => {
    const html = render('<img src=x onerror="alert(1)"> [ok](https://example.com) [bad](javascript:alert(1))');
    expect(html).not.toContain("<img");
    expect(html).toContain("&lt;img src=x");
    expect(html).toContain('href="https://example.com"');
    expect(html).not.toContain('href="javascript');
    expect(html).toContain("[bad](javascript:alert(1))");
  });
});
