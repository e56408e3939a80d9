import type { Command } from 'commander';
import { z } from 'zod';
import { ErrorCode, ShoalError } from '../../adapters/protocol/errors.js';

/**
 * Lines whose id and text sit under other field names (`{"_id": "4983", "title": ..., "text": ...}`
 * of a BEIR corpus): `--id-field F` takes the id from F, `--text-field F` the text, and
 * `--template '{title}. {text}'` builds the text from several fields. Applied to each parsed
 * line before the command's own schema, so every line command and `shoal submit` read fields
 * the same way. Without --id-field, a line that has no `id` but an id-like field (`_id`, `ID`,
 * `doc_id`...) gets its line number, and a warning, once, names the flag that keeps the ids.
 */

/** Longest --template: a few fields and separators, not a document. */
const MAX_TEMPLATE_CHARS = 4_096;
/** A field name or dotted path (`meta.title`). */
const FieldPath = z
  .string()
  .trim()
  .min(1)
  .max(256)
  .regex(/^[^.{}]+(\.[^.{}]+)*$/, 'a field name, or a dotted path such as meta.title');

/** Zod shape of the flags `addLineFieldOptions` declares. */
export const LineFieldFlags = {
  idField: FieldPath.optional(),
  textField: FieldPath.optional(),
  template: z.string().min(1).max(MAX_TEMPLATE_CHARS).optional(),
};

export interface LineFieldOptions {
  idField?: string | undefined;
  textField?: string | undefined;
  template?: string | undefined;
}

/** Declares --id-field, and --text-field / --template when the command's lines carry a text. */
export function addLineFieldOptions(command: Command, options: { text: boolean }): Command {
  command.option('--id-field <field>', 'take each line\'s id from this field (e.g. _id) instead of "id"');
  if (!options.text) return command;
  return command
    .option('--text-field <field>', 'take each line\'s text from this field (e.g. abstract) instead of "text"')
    .option('--template <text>', "build each line's text from its fields, e.g. '{title}. {text}' ({{ and }} for literal braces)");
}

type TemplatePart = { literal: string } | { field: string[] };

/** `{title}. {text}` → literal and field parts; INVALID_INPUT naming --template when malformed. */
export function parseTemplate(template: string): TemplatePart[] {
  const parts: TemplatePart[] = [];
  let literal = '';
  let fields = 0;
  for (let i = 0; i < template.length; i++) {
    const ch = template[i];
    const next = template[i + 1];
    if ((ch === '{' && next === '{') || (ch === '}' && next === '}')) {
      literal += ch;
      i++;
    } else if (ch === '{') {
      const end = template.indexOf('}', i + 1);
      if (end === -1) throw new ShoalError(ErrorCode.INVALID_INPUT, `--template "${template}": "{" at ${i} is never closed (write {{ for a literal brace)`);
      const name = FieldPath.safeParse(template.slice(i + 1, end));
      if (!name.success) throw new ShoalError(ErrorCode.INVALID_INPUT, `--template "${template}": "{${template.slice(i + 1, end)}}" is not a field name`);
      if (literal !== '') parts.push({ literal });
      literal = '';
      parts.push({ field: name.data.split('.') });
      fields++;
      i = end;
    } else if (ch === '}') {
      throw new ShoalError(ErrorCode.INVALID_INPUT, `--template "${template}": "}" at ${i} closes nothing (write }} for a literal brace)`);
    } else {
      literal += ch;
    }
  }
  if (literal !== '') parts.push({ literal });
  if (fields === 0) throw new ShoalError(ErrorCode.INVALID_INPUT, `--template "${template}" names no field; write fields as {name}, e.g. '{title}. {text}'`);
  return parts;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function pick(line: Record<string, unknown>, path: readonly string[]): unknown {
  let value: unknown = line;
  for (const key of path) {
    if (!isRecord(value)) return undefined;
    value = value[key];
  }
  return value;
}

function fieldError(message: string): ShoalError {
  return new ShoalError(ErrorCode.INVALID_INPUT, message);
}

/** A field's value as template text: strings as they are, numbers and booleans printed, absent or null as nothing. */
function templateValue(value: unknown, name: string): string {
  if (value === undefined || value === null) return '';
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  throw fieldError(`field "${name}" of --template is ${Array.isArray(value) ? 'an array' : 'an object'}; the template takes text, numbers or booleans`);
}

/** Field names that look like an id under another name: `_id`, `ID`, `doc_id`, `uniq_id`, `docid`, `uuid`... */
export function looksLikeId(key: string): boolean {
  if (key === 'id') return false;
  return /^_*id_*$/i.test(key) || /[_-]id$/i.test(key) || /^id[_-]/i.test(key) || /^(doc|docu?ment|uniq|record|row|item|corpus|passage|pass|article)id$/i.test(key) || /^[ug]uid$/i.test(key);
}

/**
 * The function that renames a parsed line's fields per the flags (returns the line unchanged
 * without them), or throws INVALID_INPUT saying which field is missing. `warn` gets the
 * "use --id-field" hint once per run.
 */
export function lineFieldMapper(options: LineFieldOptions, warn: (message: string) => void): (line: Record<string, unknown>, number: number) => Record<string, unknown> {
  const { idField, textField, template } = options;
  if (textField !== undefined && template !== undefined) {
    throw new ShoalError(ErrorCode.INVALID_INPUT, '--text-field and --template both say where the text comes from; give one');
  }
  const parts = template === undefined ? null : parseTemplate(template);
  const idPath = idField?.split('.');
  const textPath = textField?.split('.');
  let warned = false;
  return (line, number) => {
    const out: Record<string, unknown> = { ...line };
    if (idPath !== undefined) {
      const id = pick(line, idPath);
      if (typeof id !== 'string' && typeof id !== 'number') {
        throw fieldError(id === undefined || id === null ? `no "${idField}" field (--id-field ${idField})` : `"${idField}" (--id-field) is not a string or a number`);
      }
      out.id = id;
    } else if (!warned && line.id === undefined) {
      const alias = Object.keys(line).find(looksLikeId);
      if (alias !== undefined) {
        warned = true;
        warn(`line ${number} has no "id" but has "${alias}": ids will be line numbers; pass --id-field ${alias} to keep them (shown once)`);
      }
    }
    if (textPath !== undefined) {
      const text = pick(line, textPath);
      if (typeof text !== 'string') {
        throw fieldError(text === undefined || text === null ? `no "${textField}" field (--text-field ${textField})` : `"${textField}" (--text-field) is not a string`);
      }
      out.text = text;
    } else if (parts !== null) {
      let text = '';
      let found = 0;
      for (const part of parts) {
        if ('literal' in part) {
          text += part.literal;
          continue;
        }
        const value = pick(line, part.field);
        if (value !== undefined && value !== null) found++;
        text += templateValue(value, part.field.join('.'));
      }
      if (found === 0) throw fieldError(`none of the fields of --template "${template}" is in this line`);
      out.text = text;
    }
    return out;
  };
}
