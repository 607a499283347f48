"use client";

import { createContext, type ReactNode, useContext, useState } from "react";
import { Button, ButtonLink } from "@/components/ui/button";
import { compareHref, MAX_COMPARED } from "./compare-state";

type Selection = { selected: string[]; toggle(id: string): void; clear(): void };

const SelectionContext = createContext<Selection | null>(null);

/** Lets the rows of a runs table be ticked for comparison; the bar under the table opens /compare with them. */
export function RunSelection({ children }: { children: ReactNode }) {
  const [selected, setSelected] = useState<string[]>([]);
  const toggle = (id: string) => setSelected((s) => (s.includes(id) ? s.filter((x) => x !== id) : [...s, id]));
  return (
    <SelectionContext.Provider value={{ selected, toggle, clear: () => setSelected([]) }}>
      {children}
      <CompareBar />
    </SelectionContext.Provider>
  );
}

export function RunCheckbox({ id, name }: { id: string; name: string }) {
  const selection = useContext(SelectionContext);
  if (!selection) return null;
  const checked = selection.selected.includes(id);
  return (
    <input
      type="checkbox"
      aria-label={`Select ${name} to compare`}
      className="size-4 align-middle accent-brand-600"
      checked={checked}
      disabled={!checked && selection.selected.length >= MAX_COMPARED}
      onChange={() => selection.toggle(id)}
    />
  );
}

function CompareBar() {
  const selection = useContext(SelectionContext)!;
  if (selection.selected.length === 0) return null;
  const n = selection.selected.length;
  return (
    <section aria-label="Selected runs" className="flex items-center justify-end gap-3 border-t border-slate-200 bg-slate-50 px-4 py-2 text-sm">
      <span className="text-slate-600">
        {n} run{n === 1 ? "" : "s"} selected{n >= MAX_COMPARED ? ` (at most ${MAX_COMPARED})` : ""}
      </span>
      <Button variant="ghost" onClick={selection.clear}>
        Clear
      </Button>
      <ButtonLink href={compareHref(selection.selected)}>Compare</ButtonLink>
    </section>
  );
}
