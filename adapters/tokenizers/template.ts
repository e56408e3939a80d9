import { ErrorCode, ShoalError } from '../protocol/errors.js';
import type { PostProcessorJson, TemplatePieceJson } from './tokenizer-files.js';

/**
 * The special-token template of a tokenizer ([CLS] A [SEP] / [CLS] A [SEP] B [SEP], <s> A </s></s> B </s>,
 * A <|endoftext|> ...), read from tokenizer.json's post_processor. Shoal applies it itself, after
 * truncating the bare segments, so the closing special tokens are always kept.
 */

export type TemplatePiece =
  | { kind: 'special'; ids: number[]; tokens: string[]; typeId: number }
  | { kind: 'sequence'; which: 'A' | 'B'; typeId: number };

export interface SpecialTemplate {
  single: TemplatePiece[];
  pair: TemplatePiece[];
}

export interface Templated {
  ids: number[];
  typeIds: number[];
  /** 1 where the position holds a template special token. */
  specialMask: number[];
}

function countSpecial(pieces: readonly TemplatePiece[]): number {
  let n = 0;
  for (const piece of pieces) if (piece.kind === 'special') n += piece.ids.length;
  return n;
}

export function specialTokenCount(template: SpecialTemplate, paired: boolean): number {
  return countSpecial(paired ? template.pair : template.single);
}

export function applyTemplate(template: SpecialTemplate, a: readonly number[], b?: readonly number[]): Templated {
  const pieces = b === undefined ? template.single : template.pair;
  const ids: number[] = [];
  const typeIds: number[] = [];
  const specialMask: number[] = [];
  for (const piece of pieces) {
    if (piece.kind === 'special') {
      for (const id of piece.ids) {
        ids.push(id);
        typeIds.push(piece.typeId);
        specialMask.push(1);
      }
    } else {
      const segment = piece.which === 'A' ? a : (b ?? []);
      for (const id of segment) {
        ids.push(id);
        typeIds.push(piece.typeId);
        specialMask.push(0);
      }
    }
  }
  return { ids, typeIds, specialMask };
}

const NO_SPECIALS: SpecialTemplate = {
  single: [{ kind: 'sequence', which: 'A', typeId: 0 }],
  pair: [
    { kind: 'sequence', which: 'A', typeId: 0 },
    { kind: 'sequence', which: 'B', typeId: 1 },
  ],
};

type TokenLookup = (token: string) => number | undefined;

function special(token: string, id: number, typeId: number): TemplatePiece {
  return { kind: 'special', ids: [id], tokens: [token], typeId };
}

function fromTemplateProcessing(json: PostProcessorJson, lookup: TokenLookup): SpecialTemplate {
  const convert = (pieces: readonly TemplatePieceJson[] | undefined): TemplatePiece[] =>
    (pieces ?? []).map((piece): TemplatePiece => {
      if (piece.Sequence !== undefined) return { kind: 'sequence', which: piece.Sequence.id, typeId: piece.Sequence.type_id };
      if (piece.SpecialToken === undefined) throw new ShoalError(ErrorCode.MODEL_LOAD_FAILED, 'tokenizer.json template piece is empty');
      const name = piece.SpecialToken.id;
      const declared = json.special_tokens?.[name];
      if (declared !== undefined) return { kind: 'special', ids: declared.ids, tokens: declared.tokens, typeId: piece.SpecialToken.type_id };
      const id = lookup(name);
      if (id === undefined) {
        throw new ShoalError(ErrorCode.MODEL_LOAD_FAILED, `tokenizer.json template names special token "${name}" that is not in the vocabulary`);
      }
      return special(name, id, piece.SpecialToken.type_id);
    });
  const single = convert(json.single);
  const pair = json.pair !== undefined ? convert(json.pair) : [...single, ...single.map((p) => (p.kind === 'sequence' ? { ...p, which: 'B' as const, typeId: 1 } : p))];
  return { single, pair };
}

/** Builds the template from a post_processor; `lookup` resolves token strings to ids. */
export function templateFromPostProcessor(json: PostProcessorJson | null | undefined, lookup: TokenLookup): SpecialTemplate {
  if (json === null || json === undefined) return NO_SPECIALS;
  switch (json.type) {
    case 'TemplateProcessing':
      return fromTemplateProcessing(json, lookup);
    case 'BertProcessing': {
      const [cls, clsId] = json.cls ?? ['[CLS]', 101];
      const [sep, sepId] = json.sep ?? ['[SEP]', 102];
      return {
        single: [special(cls, clsId, 0), { kind: 'sequence', which: 'A', typeId: 0 }, special(sep, sepId, 0)],
        pair: [
          special(cls, clsId, 0),
          { kind: 'sequence', which: 'A', typeId: 0 },
          special(sep, sepId, 0),
          { kind: 'sequence', which: 'B', typeId: 1 },
          special(sep, sepId, 1),
        ],
      };
    }
    case 'RobertaProcessing': {
      const [cls, clsId] = json.cls ?? ['<s>', 0];
      const [sep, sepId] = json.sep ?? ['</s>', 2];
      // RoBERTa-style models have no token types: every position is type 0.
      return {
        single: [special(cls, clsId, 0), { kind: 'sequence', which: 'A', typeId: 0 }, special(sep, sepId, 0)],
        pair: [
          special(cls, clsId, 0),
          { kind: 'sequence', which: 'A', typeId: 0 },
          special(sep, sepId, 0),
          special(sep, sepId, 0),
          { kind: 'sequence', which: 'B', typeId: 0 },
          special(sep, sepId, 0),
        ],
      };
    }
    case 'Sequence': {
      for (const inner of json.processors ?? []) {
        const template = templateFromPostProcessor(inner, lookup);
        if (template !== NO_SPECIALS) return template;
      }
      return NO_SPECIALS;
    }
    default:
      // ByteLevel and other offset-only processors add no tokens.
      return NO_SPECIALS;
  }
}
