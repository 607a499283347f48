/**
 * The colour of each agent of a multi-agent episode, wherever its turns are shown (the trajectory viewer, the
 * episode player): by the agent's place in the protocol's order, so X is the same colour in every sample of a run.
 * Whole class names, for Tailwind to find them.
 */
export type AgentColour = {
  /** the left border of the agent's turns */
  border: string;
  /** the agent's name */
  text: string;
  /** a chip holding the agent's name and a value */
  chip: string;
};

const COLOURS: AgentColour[] = [
  { border: "border-l-brand-500", text: "text-brand-700", chip: "bg-brand-50 text-brand-700 ring-brand-100" },
  { border: "border-l-amber-500", text: "text-amber-800", chip: "bg-amber-50 text-amber-800 ring-amber-200" },
  { border: "border-l-emerald-500", text: "text-emerald-700", chip: "bg-emerald-50 text-emerald-700 ring-emerald-200" },
  { border: "border-l-fuchsia-500", text: "text-fuchsia-700", chip: "bg-fuchsia-50 text-fuchsia-700 ring-fuchsia-200" },
  { border: "border-l-sky-500", text: "text-sky-700", chip: "bg-sky-50 text-sky-700 ring-sky-200" },
  { border: "border-l-slate-500", text: "text-slate-700", chip: "bg-slate-100 text-slate-700 ring-slate-300" },
];

/** The colour of `agent` among `agents` (the protocol's order); colours repeat after six agents. */
export function agentColour(agents: readonly string[], agent: string): AgentColour {
  const at = agents.indexOf(agent);
  return COLOURS[(at < 0 ? agents.length : at) % COLOURS.length]!;
}
