/** The compare view's state in the URL: panels, grouping and the source baseline come back from the query string. */
import { describe, expect, it } from "vitest";
import { compareQuery, parseCompareState, parsePanel } from "@/components/compare/compare-state";

const parse = (query: string) => parseCompareState(new URLSearchParams(query));

describe("the compare view's URL", () => {
  it("restores every panel, the grouping and the baseline from the query it writes", () => {
    const state = {
      runs: ["run_a", "run_b", "run_c"],
      panels: [
        { metric: "reward/mean", x: "step" as const, smoothing: 0.6 },
        { metric: "loss/policy", x: "metric:reward/mean" as const, smoothing: 0 },
        { metric: "loss/kl", x: "tokens" as const, smoothing: 0.9 },
      ],
      group: "algorithm.learningRate",
      band: "sem" as const,
      differencesOnly: true,
      baseline: "run_b",
    };
    const query = compareQuery(state);
    expect(query).toBe(
      "runs=run_a,run_b,run_c&panels=reward/mean~step~0.6;loss/policy~metric:reward/mean~0;loss/kl~tokens~0.9&group=algorithm.learningRate&band=sem&diff=1&base=run_b",
    );
    expect(parse(query)).toEqual(state);
  });

  it("writes a plain comparison as its runs alone, and reads it back with one reward panel", () => {
    const state = parse("runs=run_a,run_b");
    expect(state.panels).toEqual([{ metric: "reward/mean", x: "step", smoothing: 0.6 }]);
    expect(compareQuery(state)).toBe("runs=run_a,run_b");
  });

  it("opens a link from before panels as one panel of its metric, smoothing and x-axis", () => {
    expect(parse("runs=a&metric=loss/policy&smooth=0.9&x=time").panels).toEqual([{ metric: "loss/policy", x: "time", smoothing: 0.9 }]);
  });

  it("leaves out a panel that does not read as one, and clamps smoothing to 0..0.99", () => {
    expect(parsePanel("reward/mean~sideways~0.5")).toBeNull();
    expect(parsePanel("reward/mean~step")).toBeNull();
    expect(parsePanel("reward/mean~step~lots")).toBeNull();
    expect(parsePanel("reward/mean~step~5")).toEqual({ metric: "reward/mean", x: "step", smoothing: 0.99 });
    expect(parse("panels=bad;loss/kl~time~0").panels).toEqual([{ metric: "loss/kl", x: "time", smoothing: 0 }]);
  });
});
