/** How an episode the player played came to its end, in words for its outcome line. */
import type { Protocol, Trajectory } from "@/lib/sdk/protocol";

/**
 * Why `trajectory` ended, or null for an end the environment reached with nothing more to say. A game whose last
 * step names its `winner` (the board games' duels) ends with "X won" or "a draw". An episode cut short names its
 * reason: the environment's turn limit (`maxTurns`, marked on the last turn's info by the SDK), an invalid move that
 * ended it (the last turn's `info.invalid`), a single-turn protocol's one turn, or otherwise the conversation
 * outgrowing the policy's context (`contextLength`), the only other way `runEpisodes` cuts an episode short.
 */
export function describeEnd(
  trajectory: Pick<Trajectory, "turns" | "truncated">,
  { protocol, maxTurns, contextLength }: { protocol: Pick<Protocol, "name">; maxTurns: number; contextLength: number | null },
): string | null {
  const last = trajectory.turns.at(-1);
  if (trajectory.truncated) {
    if (last?.info.truncated === true) return `cut short: the turn limit (${maxTurns} turn${maxTurns === 1 ? "" : "s"})`;
    if (protocol.name === "single-turn" && last) return "cut short: a single-turn episode has one turn, and it did not end it";
    return `cut short: the conversation outgrew the policy's context${contextLength === null ? "" : ` (${contextLength} tokens)`}`;
  }
  if (last && typeof last.info.invalid === "string") return `cut short by ${last.agent}'s invalid move (${last.info.invalid})`;
  const winner = last?.info.winner;
  if (winner === "draw") return "a draw";
  if (typeof winner === "string") return `${winner} won`;
  return null;
}
