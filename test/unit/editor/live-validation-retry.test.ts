/**
 * The editor's live validation asks again by itself when the server answers that it is busy or that the caller is
 * over its validation limit (429 with the seconds to wait), and not after any other failure.
 */
import { TRPCClientError } from "@trpc/client";
import { describe, expect, it } from "vitest";
import { retryDelayMs } from "@/components/editor/use-live-validation";

const refusal = (code: string, retryAfterS: unknown) =>
  TRPCClientError.from({ error: { message: "refused", code: -32029, data: { code, httpStatus: 429, retryAfterS } } } as never);

describe("the editor's validation after a refusal", () => {
  it("waits the seconds a 429 names, within 1 to 60, then asks again", () => {
    expect(retryDelayMs(refusal("TOO_MANY_REQUESTS", 3))).toBe(3000);
    expect(retryDelayMs(refusal("TOO_MANY_REQUESTS", null))).toBe(1000);
    expect(retryDelayMs(refusal("TOO_MANY_REQUESTS", 600))).toBe(60_000);
  });

  it("does not ask again after another failure", () => {
    expect(retryDelayMs(refusal("BAD_REQUEST", 3))).toBeNull();
    expect(retryDelayMs(new Error("network down"))).toBeNull();
    expect(retryDelayMs(null)).toBeNull();
  });
});
