import { z } from 'zod';

/**
 * How a setting's text (a flag as typed, or an environment variable) becomes a value: the zod
 * schemas every service's config code shares, so `--threads 0` and `SHOAL_PORT=eighty` are
 * refused with the same words everywhere.
 */

/** A whole number from `min` to `max`, written in digits. */
export const WholeNumberFlag = (min: number, max: number) => {
  // One wording for every way to miss (`-1`, `0`, `2.5`, `1e9`): the range, not zod's "Too small".
  const range = `must be a whole number from ${min} to ${max}`;
  return z
    .string()
    .trim()
    .regex(/^\d+$/, range)
    .transform(Number)
    .pipe(z.number().int().min(min, range).max(max, range));
};

/** A whole number from 1 to `max`. */
export const PositiveIntFlag = (max: number) => WholeNumberFlag(1, max);

export const UnitIntervalFlag = z
  .string()
  .trim()
  .regex(/^(0(\.\d+)?|1(\.0+)?|\.\d+)$/, 'must be a number from 0 to 1')
  .transform(Number);

/** `a, b,,c` → ['a', 'b', 'c']. */
export const CommaListFlag = z.string().transform((value) => value.split(',').map((part) => part.trim()).filter((part) => part !== ''));
