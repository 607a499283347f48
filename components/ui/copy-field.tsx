"use client";

import { useState } from "react";
import { Button } from "./button";

/** A secret shown once (an invitation link, an API key): the whole text, selectable, and a Copy button. */
export function CopyField({ value, label }: { value: string; label: string }) {
  const [copied, setCopied] = useState<boolean | null>(null);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(value);
      setCopied(true);
    } catch {
      // Without clipboard access (an insecure origin, a denied permission) the text stays there to select.
      setCopied(false);
    }
  };
  return (
    <div className="space-y-1.5">
      <textarea
        readOnly
        aria-label={label}
        value={value}
        rows={2}
        onFocus={(event) => event.currentTarget.select()}
        className="field-sizing-content block w-full resize-none break-all rounded-md border border-slate-300 bg-white px-2.5 py-1.5 font-mono text-xs text-slate-800 focus:border-brand-500 focus:outline-none"
      />
      <div className="flex items-center gap-2">
        <Button type="button" variant="secondary" onClick={() => void copy()}>
          {copied === true ? "Copied" : "Copy"}
        </Button>
        {copied === false && <span className="text-xs text-slate-500">The browser refused the clipboard: select the text and copy it.</span>}
      </div>
    </div>
  );
}
