import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { ErrorCode, ShoalError } from '../../../adapters/protocol/errors.js';
import { DEFAULT_LIMITS } from '../../../adapters/protocol/limits.js';
import { parseWith } from '../../../adapters/protocol/validate.js';
import type { RouteContext } from '../context.js';
import { OTHER_MODEL } from '../request-metrics.js';
import { teiTokens, type TeiToken } from '../tei-tokens.js';
import { EMBED_MODEL_SETTING, PromptName, TeiInputs, inputTexts, teiModel, teiPaths } from './tei-common.js';

/**
 * TEI's POST /tokenize `{inputs, add_special_tokens?}` → for each input, its tokens as
 * `[{id, text, special, start, stop}]` (tei-tokens.ts): the model's own tokenizer, run by the
 * engine's tokenize primitive, with the special tokens of its template flagged (start/stop null)
 * and UTF-8 byte offsets into the input for the others, as TEI reports them. The model is the
 * embed model, or the route's prefix (tei-common.ts).
 *
 * Differences from TEI: TEI tokenizes without truncation, Shoal's engine up to the model's
 * maximum, so an input longer than that is refused (413, with its token count in the details)
 * instead of answered in part; `prompt_name` is refused (the offsets would point into a prompt the
 * gateway does not see). Offsets are located by the tokens' surface forms: exact for WordPiece,
 * SentencePiece and byte-level BPE words; a byte-level token holding part of a character gets the
 * character's span. POST /decode is not offered: the engine has no decode primitive.
 */

export const TeiTokenizeBody = z.object({
  inputs: TeiInputs,
  add_special_tokens: z.boolean().default(true),
  prompt_name: PromptName,
});

/**
 * Characters of one request: offsets are located on the gateway's own thread, in time linear in
 * the text, so a request is bounded well below what the body limit would let through.
 */
export const MAX_TOKENIZE_CHARS = DEFAULT_LIMITS.maxTextChars;

export function registerTeiTokenizeRoutes(app: FastifyInstance, context: RouteContext): void {
  const tokenize = async (request: FastifyRequest, reply: FastifyReply): Promise<TeiToken[][]> => {
    context.metrics.track(request, { primitive: 'tokenize', model: OTHER_MODEL });
    const model = teiModel(request, { model: context.settings.embedModel, route: 'tokenize', setting: EMBED_MODEL_SETTING });
    const body = parseWith(TeiTokenizeBody, request.body, 'tokenize request');
    if (body.prompt_name !== undefined) {
      throw new ShoalError(ErrorCode.UNSUPPORTED_OPERATION, 'prompt_name is not supported by /tokenize: send the prompt as part of the input');
    }
    const texts = inputTexts(body.inputs);
    const chars = texts.reduce((sum, text) => sum + text.length, 0);
    if (chars > MAX_TOKENIZE_CHARS) {
      throw new ShoalError(ErrorCode.INPUT_TOO_LARGE, `the inputs hold ${chars} characters, more than /tokenize's limit of ${MAX_TOKENIZE_CHARS}`, {
        details: { limitChars: MAX_TOKENIZE_CHARS },
      });
    }
    context.metrics.track(request, { primitive: 'tokenize', model });
    const [facts, result] = await context.call(reply)((signal) =>
      Promise.all([context.modelFacts.get(model), context.deps.engine.tokenize({ model, items: texts }, { signal })]),
    );
    const cut = result.items.find((item) => item.truncated);
    if (cut !== undefined) {
      throw new ShoalError(
        ErrorCode.INPUT_TOO_LARGE,
        `input ${cut.index} has ${cut.length} tokens, more than the model's maximum of ${facts.maxInputLength}; /tokenize does not cut inputs`,
        { details: { index: cut.index, tokens: cut.length, maxTokens: facts.maxInputLength } },
      );
    }
    return result.items.map((item) => teiTokens(texts[item.index] ?? '', item, facts.templateIds, body.add_special_tokens));
  };

  for (const path of teiPaths('tokenize')) app.post(path, tokenize);
}
