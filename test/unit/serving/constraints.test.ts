/**
 * Constrained output's formats as the legal-action automaton holds them: a JSON schema's replies are exactly the
 * compact JSON the schema allows, json_object any flat object, and what the automaton cannot hold is refused with
 * what was given and what is accepted.
 */
import { describe, expect, it } from "vitest";
import { automatonFor } from "@/lib/sdk/action-space";
import { ConstraintError, requestConstraint, schemaPattern } from "@/server/serving";

const accepts = (pattern: string, text: string) => automatonFor({ pattern }).matches(text);

describe("constrained output", () => {
  it("holds a reply to a schema's properties, types, enums and list bounds", () => {
    const pattern = schemaPattern({
      type: "object",
      properties: {
        name: { type: "string", maxLength: 4 },
        age: { type: "integer" },
        ok: { type: "boolean" },
        tags: { type: "array", items: { enum: ["a", "b"] }, maxItems: 2 },
      },
    });
    expect(accepts(pattern, '{"name":"bo","age":-3,"ok":true,"tags":["a","b"]}')).toBe(true);
    expect(accepts(pattern, '{"name":"b\\"o","age":0,"ok":false,"tags":[]}')).toBe(true);
    expect(accepts(pattern, '{"name":"bobby","age":1,"ok":true,"tags":[]}')).toBe(false); // over maxLength
    expect(accepts(pattern, '{"name":"bo","age":1.5,"ok":true,"tags":[]}')).toBe(false); // not an integer
    expect(accepts(pattern, '{"name":"bo","age":1,"ok":true,"tags":["a","b","a"]}')).toBe(false); // over maxItems
    expect(accepts(pattern, '{"age":1,"name":"bo","ok":true,"tags":[]}')).toBe(false); // the schema's order
  });

  it("takes json_object as any flat object, and guided_regex and guided_choice as given", () => {
    const object = requestConstraint({ response_format: { type: "json_object" } })!;
    const automaton = automatonFor(object);
    expect(automaton.matches('{"a":1,"b":[true,null,"x"],"c":-2.25}')).toBe(true);
    expect(automaton.matches("{}")).toBe(true);
    expect(automaton.matches("[1]")).toBe(false);
    expect(requestConstraint({ guided_choice: ["yes", "no"] })).toEqual({ actions: ["yes", "no"] });
    expect(requestConstraint({ guided_regex: "\\d{3}" })).toEqual({ pattern: "\\d{3}" });
    expect(requestConstraint({ response_format: { type: "text" } })).toBeNull();
  });

  it("refuses what the automaton cannot hold, saying what is accepted", () => {
    const refusal = (body: Record<string, unknown>) => {
      try {
        requestConstraint(body);
      } catch (error) {
        expect(error).toBeInstanceOf(ConstraintError);
        return (error as ConstraintError).message;
      }
      throw new Error("not refused");
    };
    expect(refusal({ response_format: { type: "json_schema", json_schema: { schema: { $ref: "#/a" } } } })).toMatch(
      /'\$ref' is not supported; a schema may use type, properties/,
    );
    expect(refusal({ response_format: { type: "xml" } })).toMatch(/must be text, json_object or json_schema; got "xml"/);
    expect(refusal({ guided_regex: "^a$" })).toMatch(/anchors/);
    expect(refusal({ guided_choice: [] })).toMatch(/is empty/);
    expect(refusal({ guided_regex: "a", guided_choice: ["a"] })).toMatch(/give one of/);
    const wide = { type: "object", properties: Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`field${i}`, { type: "string" }])) };
    expect(refusal({ response_format: { type: "json_schema", json_schema: { schema: wide } } })).toMatch(/at most 1000 characters.*simplify the schema/);
  });
});
