"use client";

import { Fragment, useId } from "react";
import type { GeneratedToken } from "./protocol";
import type { TokenLabels } from "./token-label";

/** Chip colours by the token's probability, most confident first. */
const BANDS = [
  { min: 0.9, label: "≥ 90%", className: "bg-emerald-100 text-emerald-950 ring-emerald-300" },
  { min: 0.6, label: "60–90%", className: "bg-lime-100 text-lime-950 ring-lime-300" },
  { min: 0.3, label: "30–60%", className: "bg-amber-100 text-amber-950 ring-amber-300" },
  { min: 0.1, label: "10–30%", className: "bg-orange-100 text-orange-950 ring-orange-300" },
  { min: 0, label: "< 10%", className: "bg-red-100 text-red-950 ring-red-300" },
] as const;

const bandOf = (probability: number) => BANDS.find((band) => probability >= band.min) ?? BANDS[BANDS.length - 1];
const percent = (probability: number) => `${(probability * 100).toFixed(probability >= 0.995 || probability < 0.001 ? 1 : 0)}%`;

export function ProbabilityLegend() {
  return (
    <ul aria-label="Chip colours" className="flex flex-wrap items-center gap-1.5 text-xs text-slate-500">
      <li>Probability:</li>
      {BANDS.map((band) => (
        <li key={band.label} className={`rounded px-1.5 py-0.5 ring-1 ring-inset ${band.className}`}>
          {band.label}
        </li>
      ))}
    </ul>
  );
}

/**
 * One generated token: a button that shows the top alternatives in a tooltip while hovered or focused (the tooltip
 * sits beside the button, not inside it, so that it stays out of the button's name).
 */
function TokenChip({ token, labels }: { token: GeneratedToken; labels: TokenLabels }) {
  const tooltip = useId();
  const label = labels.label(token.token);
  return (
    <li className="group relative">
      <button
        type="button"
        aria-describedby={tooltip}
        className={`inline-flex min-w-5 cursor-default justify-center rounded px-1 py-0.5 font-mono text-sm ring-1 ring-inset focus:outline-2 focus:outline-brand-500 ${bandOf(token.probability).className}`}
      >
        {label}
      </button>
      <span
        id={tooltip}
        role="tooltip"
        className="absolute top-full left-0 z-20 mt-1 hidden w-44 rounded-md border border-slate-200 bg-white p-2 text-xs text-slate-700 shadow-lg group-focus-within:block group-hover:block"
      >
        <span className="mb-1 block font-sans font-medium text-slate-900">
          “{label}” {percent(token.probability)}
        </span>
        <span className="block font-sans text-slate-500">Most likely here:</span>
        {token.alternatives.map((choice) => (
          <span key={choice.token} className={`flex justify-between gap-2 ${choice.token === token.token ? "font-semibold text-slate-900" : ""}`}>
            <span className="font-mono break-all">{labels.label(choice.token)}</span>
            <span className="tabular-nums">{percent(choice.probability)}</span>
          </span>
        ))}
      </span>
    </li>
  );
}

/** Where a line of chips ends: an empty item that takes a whole row, hidden from screen readers. */
const LineBreak = () => <li aria-hidden className="basis-full" />;

/** The generated tokens as chips coloured by probability; hovering or focusing one shows the top alternatives. */
export function TokenStream({ tokens, labels }: { tokens: readonly GeneratedToken[]; labels: TokenLabels }) {
  return (
    <ol aria-label="Generated tokens" className="flex flex-wrap items-center gap-1">
      {tokens.map((token, i) => (
        <Fragment key={i}>
          <TokenChip token={token} labels={labels} />
          {labels.endsLine(token.token) && <LineBreak />}
        </Fragment>
      ))}
    </ol>
  );
}

/** Token ids as plain chips (the prompt as the model reads it), lines broken where the text breaks them. */
export function TokenList({ tokens, labels, label }: { tokens: readonly number[]; labels: TokenLabels; label: string }) {
  return (
    <ol aria-label={label} className="flex flex-wrap items-center gap-1">
      {tokens.map((token, i) => (
        <Fragment key={i}>
          <li className="inline-flex min-w-5 justify-center rounded bg-slate-100 px-1 py-0.5 font-mono text-sm text-slate-700 ring-1 ring-slate-200 ring-inset">
            {labels.label(token)}
          </li>
          {labels.endsLine(token) && <LineBreak />}
        </Fragment>
      ))}
    </ol>
  );
}
