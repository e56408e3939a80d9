import { ErrorCode, ShoalError } from '../../protocol/errors.js';

/**
 * The XML parts of ZIP containers (OOXML, EPUB packages) as a small typed tree, through
 * fast-xml-parser in document order. Element names lose their namespace prefix (`a:t` is `t`);
 * attribute names keep it (`r:id`, since a slide id has both `id` and `r:id`). Entities a part
 * declares in its DOCTYPE stay within fast-xml-parser's bounds: a "billion laughs" part keeps its
 * nested references unexpanded (formats.test.ts), so it cannot grow.
 */

export interface XmlElement {
  name: string;
  attributes: Readonly<Record<string, string>>;
  children: readonly XmlNode[];
}

export type XmlNode = XmlElement | { text: string };

/** Nesting a part may have (group shapes in group shapes, tables in tables). */
const MAX_NESTED_TAGS = 512;

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

const localName = (name: string): string => name.slice(name.indexOf(':') + 1);

/** fast-xml-parser's ordered output (`[{tag: [...children], ':@': {attrs}}, {'#text': ...}]`) as XmlNodes. */
function toNodes(raw: unknown): XmlNode[] {
  if (!Array.isArray(raw)) return [];
  const nodes: XmlNode[] = [];
  for (const item of raw) {
    if (!isRecord(item)) continue;
    for (const [key, value] of Object.entries(item)) {
      if (key === ':@') continue;
      if (key === '#text') {
        if (typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean') nodes.push({ text: String(value) });
        continue;
      }
      // Processing instructions and comments are not content.
      if (key.startsWith('?') || key === '#comment') continue;
      const attributes: Record<string, string> = {};
      const rawAttributes = item[':@'];
      if (isRecord(rawAttributes)) for (const [name, attribute] of Object.entries(rawAttributes)) attributes[name] = String(attribute);
      nodes.push({ name: localName(key), attributes, children: toNodes(value) });
    }
  }
  return nodes;
}

/**
 * The validator's complaint as a reader takes it. Several tags left open come as
 * `Invalid '[    "w:document",    "w:body"]' found.` at a line 1 that is no place in the part:
 * said as the unclosed tags instead.
 */
function validatorProblem(error: { msg: string; line: number }): string {
  const open = /^Invalid '(\[.*\])' found\.$/s.exec(error.msg)?.[1];
  if (open !== undefined) {
    try {
      const tags: unknown = JSON.parse(open);
      if (Array.isArray(tags)) return `unclosed tags ${tags.map(String).join(', ')}`;
    } catch {
      // Not the list it looked like: the message as it is.
    }
  }
  return `${error.msg}, line ${error.line}`;
}

/** The root elements of an XML text; DOCUMENT_CORRUPT (naming `part` of the `label`) when it is not well-formed. */
export async function parseXml(text: string, label: string, part: string): Promise<XmlElement> {
  const { XMLParser, XMLValidator } = await import('fast-xml-parser');
  const valid = XMLValidator.validate(text);
  if (valid !== true) throw new ShoalError(ErrorCode.DOCUMENT_CORRUPT, `the ${label} is damaged: ${part} is not well-formed XML (${validatorProblem(valid.err)})`);
  let raw: unknown;
  try {
    const parser = new XMLParser({
      preserveOrder: true,
      ignoreAttributes: false,
      attributeNamePrefix: '',
      trimValues: false,
      parseTagValue: false,
      parseAttributeValue: false,
      ignoreDeclaration: true,
      ignorePiTags: true,
      maxNestedTags: MAX_NESTED_TAGS,
    });
    raw = parser.parse(text);
  } catch (error) {
    throw new ShoalError(ErrorCode.DOCUMENT_CORRUPT, `the ${label} is damaged: ${part} cannot be read (${error instanceof Error ? error.message : String(error)})`, { cause: error });
  }
  const root = toNodes(raw).find((node): node is XmlElement => 'name' in node);
  if (root === undefined) throw new ShoalError(ErrorCode.DOCUMENT_CORRUPT, `the ${label} is damaged: ${part} has no root element`);
  return root;
}

export function isElement(node: XmlNode): node is XmlElement {
  return 'name' in node;
}

/** Child elements named `name` (local name). */
export function children(element: XmlElement, name: string): XmlElement[] {
  return element.children.filter((node): node is XmlElement => isElement(node) && node.name === name);
}

export function child(element: XmlElement, name: string): XmlElement | undefined {
  return children(element, name)[0];
}

/** Elements named `name` below `element`, in document order, not looking inside a match. */
export function descendants(element: XmlElement, name: string): XmlElement[] {
  const found: XmlElement[] = [];
  const walk = (node: XmlElement): void => {
    for (const item of node.children) {
      if (!isElement(item)) continue;
      if (item.name === name) found.push(item);
      else walk(item);
    }
  };
  walk(element);
  return found;
}

/** All the character data below `element`, concatenated. */
export function textOf(element: XmlElement): string {
  return element.children.map((node) => (isElement(node) ? textOf(node) : node.text)).join('');
}
