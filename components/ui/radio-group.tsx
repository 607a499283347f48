"use client";

import { useId } from "react";

/**
 * A few exclusive choices drawn as one row of buttons but made of native radios: Tab reaches the chosen one, the
 * arrow keys move the choice, and a screen reader announces "radio, 2 of 2" under the group's label.
 */
export function RadioGroup<T extends string>({
  label,
  options,
  value,
  onChange,
  className = "",
  optionClassName = "",
}: {
  label: string;
  options: readonly (readonly [value: T, text: string])[];
  value: NoInfer<T>;
  onChange(value: NoInfer<T>): void;
  className?: string;
  optionClassName?: string;
}) {
  const name = useId();
  return (
    <fieldset aria-label={label} className={`flex ${className}`}>
      {options.map(([option, text]) => (
        <label
          key={option}
          className={`relative cursor-pointer has-[:focus-visible]:outline-2 has-[:focus-visible]:-outline-offset-2 has-[:focus-visible]:outline-brand-500 ${optionClassName} ${option === value ? "bg-brand-50 text-brand-700" : "text-slate-600 hover:bg-slate-100"}`}
        >
          {/* The radio covers its label, invisible: a click lands on the radio itself. */}
          <input
            type="radio"
            name={name}
            value={option}
            checked={option === value}
            onChange={() => onChange(option)}
            className="absolute inset-0 cursor-pointer opacity-0"
          />
          {text}
        </label>
      ))}
    </fieldset>
  );
}
