import { describe, expect, it } from "vitest";
import { InvalidJobTransitionError, canTransition, jobStates, terminalJobStates, transition } from "@/lib/lifecycle";

describe("job state machine", () => {
  it("allows the life of a job that is placed, preempted, paused, resumed and completed", () => {
    const path = ["queued", "placing", "running", "queued", "placing", "running", "paused", "queued", "placing", "running", "completed"] as const;
    for (let i = 1; i < path.length; i++) {
      expect(transition(path[i - 1], path[i], "because", i)).toEqual({ from: path[i - 1], to: path[i], reason: "because", at: i });
    }
  });

  it("rejects a transition with an error naming both states", () => {
    expect(() => transition("completed", "running", "retry", 0)).toThrow(InvalidJobTransitionError);
    expect(() => transition("completed", "running", "retry", 0)).toThrow(/from 'completed' to 'running'/);
    expect(() => transition("queued", "completed", "skip", 0)).toThrow(/from 'queued' a job may go to 'placing'/);
  });

  it("lets nothing leave a terminal state and needs a reason", () => {
    for (const from of terminalJobStates) for (const to of jobStates) expect(canTransition(from, to)).toBe(false);
    expect(() => transition("queued", "cancelled", " ", 0)).toThrow(/needs a reason/);
  });
});
