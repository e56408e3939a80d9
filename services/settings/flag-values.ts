import { z } from 'zod';

/**
 * How a setting's text (a flag as typed, or an environment variable) becomes a value: the zod
 * schemas every service's config code shares, so `--threads 0` and `SHOAL_PORT=eighty` are
 * refused with the same words everywhere.
 */

/** What a whole-number setting must be: one wording for every way to miss (`-1`, `0`, `2.5`, `1e9`, `abc`), not zod's "Too small". */
export const wholeNumberRange = (min: number, max: number): string => `must be a whole number from ${min} to ${max}`;

/**
 * A whole number from `min` to `max` that is already a number, or the text of a variable that was
 * not digits (services/settings/engine-settings.ts `wholeNumber` passes it through): refused with
 * the range, as its flag is, instead of "expected number, received string".
 */
export const WholeNumberValue = (min: number, max: number, range = wholeNumberRange(min, max)) =>
  z.number({ error: range }).int(range).min(min, range).max(max, range);

/** A whole number from `min` to `max`, written in digits; `range` words a miss when the setting takes more than numbers. */
export const WholeNumberFlag = (min: number, max: number, range = wholeNumberRange(min, max)) =>
  z
    .string()
    .trim()
    .regex(/^\d+$/, range)
    .transform(Number)
    .pipe(z.number().int().min(min, range).max(max, range));

/** A whole number from 1 to `max`. */
export const PositiveIntFlag = (max: number) => WholeNumberFlag(1, max);

export const UnitIntervalFlag = z
  .string()
  .trim()
  .regex(/^(0(\.\d+)?|1(\.0+)?|\.\d+)$/, 'must be a number from 0 to 1')
  .transform(Number);

/** `a, b,,c` → ['a', 'b', 'c']. */
export const CommaListFlag = z.string().transform((value) => value.split(',').map((part) => part.trim()).filter((part) => part !== ''));

const NATS_URL = 'must be nats://host:port (or tls://, ws://, wss://), comma-separated for several servers';

/** One NATS server URL. */
const NatsUrl = z.string().regex(/^(nats|tls|wss?):\/\/[^\s,]+$/, NATS_URL);

/**
 * `--nats nats://a:4222,nats://b:4222`: the servers, at least one. A word that is no URL
 * (`--nats notaurl`) is a bad command line, refused before any connection: the client read it as
 * a host name and failed as UNAVAILABLE (exit 1), or a server retried it for ever.
 */
export const NatsUrlsFlag = CommaListFlag.pipe(z.array(NatsUrl).min(1, NATS_URL));

/** The same check for a command that keeps `--nats` as typed (it splits the list itself). */
export const NatsUrlsText = z.string().refine((value) => NatsUrlsFlag.safeParse(value).success, NATS_URL);
