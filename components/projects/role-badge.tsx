import type { ProjectRole } from "./roles";

const styles: Record<ProjectRole, string> = {
  owner: "bg-brand-50 text-brand-700 ring-brand-500/30",
  editor: "bg-slate-100 text-slate-700 ring-slate-300",
  viewer: "bg-white text-slate-600 ring-slate-300",
};

export function RoleBadge({ role }: { role: ProjectRole }) {
  return <span className={`inline-flex rounded-full px-2 py-0.5 text-xs font-medium ring-1 ring-inset ${styles[role]}`}>{role}</span>;
}
