import { ErrorCode, ShoalError } from '../../adapters/protocol/errors.js';
import type { Role } from '../../adapters/protocol/requests.js';
import type { ModelProfile } from '../../adapters/models/profile.js';

/**
 * Which text is prepended to an item: a literal prompt, an instruction filled into the model's
 * template, a named prompt, the prompt of the item's role, or the model's default prompt, in
 * that order (the sentence-transformers rule: the prompt string is prepended to the raw text).
 */

export interface PromptChoice {
  /** Named prompt from the request. */
  prompt?: string | undefined;
  /** Literal prompt text from the request. */
  promptText?: string | undefined;
  instruction?: string | undefined;
}

export function promptFor(profile: ModelProfile, role: Role | undefined, choice: PromptChoice): string {
  if (choice.promptText !== undefined) return choice.promptText;
  if (choice.instruction !== undefined) {
    if (profile.instructionTemplate === null) {
      throw new ShoalError(
        ErrorCode.INVALID_INPUT,
        `model ${profile.id} has no instruction template; pass prompt_text instead, or set instruction_template in the catalog`,
      );
    }
    return profile.instructionTemplate.split('{instruction}').join(choice.instruction);
  }
  const name = choice.prompt ?? (role === undefined ? undefined : profile.rolePrompts[role]) ?? profile.defaultPrompt ?? undefined;
  if (name === undefined) return '';
  const text = profile.prompts[name];
  if (text === undefined) {
    const known = Object.keys(profile.prompts);
    throw new ShoalError(
      ErrorCode.INVALID_INPUT,
      `model ${profile.id} has no prompt "${name}" (${known.length > 0 ? `known: ${known.join(', ')}` : 'it defines no prompts'})`,
    );
  }
  return text;
}
