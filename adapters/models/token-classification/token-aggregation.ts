import type { Aggregation } from '../../protocol/requests.js';
import type { Entity } from '../../protocol/results.js';
import type { Span } from '../../tokenizers/offsets.js';

/**
 * Token predictions → entities, with the semantics of Hugging Face's TokenClassificationPipeline
 * (aggregation_strategy 'none', 'simple', 'first'), so a model gives the entities its users
 * already know from transformers. Pure: the runner supplies per-token argmax and probability.
 * Offsets are UTF-16 code units (JavaScript string indices); where the pipeline measures lengths
 * in code points, so does this file.
 */

/**
 * How sub-word tokens are recognized for word-level aggregation ('first'):
 * `length`: the tokenizer marks continuations (WordPiece '##'), and a token is a sub-word when its
 * string and its original characters differ in length; `space`: no marker, so a token is a
 * sub-word when no space precedes it or starts it (the pipeline's fallback heuristic).
 */
export type SubwordRule = 'length' | 'space';

export interface TokenPrediction {
  token: string;
  span: Span;
  /** Argmax label of the token. */
  label: string;
  /** Probability of that label (softmax over the token's logits). */
  score: number;
  subword: boolean;
}

function codePoints(text: string): number {
  let n = 0;
  for (const _ of text) n++;
  return n;
}

/** The pipeline's `is_subword` for one token; an unknown token is always a word start. */
export function isSubword(rule: SubwordRule, token: string, text: string, span: Span, unknown: boolean): boolean {
  if (unknown) return false;
  const [start, end] = span;
  if (rule === 'length') return codePoints(token) !== codePoints(text.slice(start, end));
  // A space is a single UTF-16 unit, so a surrogate half never matches it.
  return start > 0 && text[start - 1] !== ' ' && text[start] !== ' ';
}

interface Tagged {
  label: string;
  score: number;
  span: Span;
}

/** The pipeline's get_tag: B-/I- prefixes are read, any other label counts as I- of itself. */
function splitTag(label: string): { begin: boolean; tag: string } {
  if (label.startsWith('B-')) return { begin: true, tag: label.slice(2) };
  if (label.startsWith('I-')) return { begin: false, tag: label.slice(2) };
  return { begin: false, tag: label };
}

/** Group name as the pipeline writes entity_group: the label after its first '-'. */
function groupName(label: string): string {
  const dash = label.indexOf('-');
  return dash < 0 ? label : label.slice(dash + 1);
}

function closeGroup(group: readonly Tagged[]): Tagged {
  const first = group[0];
  const last = group[group.length - 1];
  if (first === undefined || last === undefined) throw new RangeError('empty entity group');
  let sum = 0;
  for (const member of group) sum += member.score;
  return { label: groupName(first.label), score: sum / group.length, span: [first.span[0], last.span[1]] };
}

/** Consecutive items join while the tag is unchanged and the newcomer is not a B-. */
function groupByTag(items: readonly Tagged[]): Tagged[] {
  const groups: Tagged[] = [];
  let open: Tagged[] = [];
  for (const item of items) {
    const previous = open[open.length - 1];
    if (previous !== undefined) {
      const current = splitTag(item.label);
      if (current.begin || current.tag !== splitTag(previous.label).tag) {
        groups.push(closeGroup(open));
        open = [];
      }
    }
    open.push(item);
  }
  if (open.length > 0) groups.push(closeGroup(open));
  return groups;
}

/** 'first': a word is its first token plus the sub-word tokens after it, labelled by the first token. */
function mergeWords(tokens: readonly TokenPrediction[]): Tagged[] {
  const words: Tagged[] = [];
  for (const token of tokens) {
    const last = words[words.length - 1];
    if (token.subword && last !== undefined) last.span = [last.span[0], token.span[1]];
    else words.push({ label: token.label, score: token.score, span: [token.span[0], token.span[1]] });
  }
  return words;
}

export interface AggregateOptions {
  strategy: Aggregation;
  /** Label of tokens outside any entity; such tokens and groups are dropped. */
  outside: string;
  /** Entities scoring below this are dropped. */
  threshold?: number;
}

/** Entities of one text from its (non-special) token predictions, in text order. */
export function aggregateEntities(text: string, tokens: readonly TokenPrediction[], options: AggregateOptions): Entity[] {
  let tagged: Tagged[];
  switch (options.strategy) {
    case 'none':
      tagged = tokens.map((t) => ({ label: t.label, score: t.score, span: t.span }));
      break;
    case 'simple':
      tagged = groupByTag(tokens);
      break;
    case 'first':
      tagged = groupByTag(mergeWords(tokens));
      break;
  }
  const threshold = options.threshold ?? Number.NEGATIVE_INFINITY;
  const entities: Entity[] = [];
  for (const item of tagged) {
    if (item.label === options.outside || item.score < threshold) continue;
    const [start, end] = item.span;
    entities.push({ text: text.slice(start, end), label: item.label, score: item.score, start, end });
  }
  return entities;
}
