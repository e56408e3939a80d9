/**
 * The part of the browser the console uses, typed here: the project is type-checked as one Node
 * program, and TypeScript's DOM library clashes with @types/node (their stream types disagree),
 * so it cannot be switched on for these files alone. fetch, FormData, Blob, URL and timers are
 * common to both and come from the Node types. The browser test (test/integration/
 * console-browser.test.ts) is what checks these declarations against a real Chromium.
 */

export interface ConsoleEvent {
  readonly key?: string;
  preventDefault(): void;
}

/** A file chosen in an `<input type="file">`. */
export interface ChosenFile extends Blob {
  readonly name: string;
}

/** An element; the members of form controls are on it too (a control is looked up by its id). */
export interface ConsoleElement {
  id: string;
  hidden: boolean;
  textContent: string | null;
  className: string;
  tabIndex: number;
  /** Form controls: `<input>`, `<select>`, `<progress>`, `<meter>`. */
  value: string;
  checked: boolean;
  disabled: boolean;
  max: number;
  readonly files: ArrayLike<ChosenFile> | null;
  readonly classList: { add(...tokens: string[]): void; remove(...tokens: string[]): void; toggle(token: string, force?: boolean): boolean };
  readonly dataset: Record<string, string | undefined>;
  setAttribute(name: string, value: string): void;
  getAttribute(name: string): string | null;
  removeAttribute(name: string): void;
  append(...nodes: Array<ConsoleElement | string>): void;
  replaceChildren(...nodes: Array<ConsoleElement | string>): void;
  querySelector(selector: string): ConsoleElement | null;
  querySelectorAll(selector: string): ArrayLike<ConsoleElement>;
  addEventListener(type: string, listener: (event: ConsoleEvent) => void): void;
  focus(): void;
  reset(): void;
}

interface ConsoleStorage {
  getItem(key: string): string | null;
  setItem(key: string, value: string): void;
  removeItem(key: string): void;
}

interface BrowserGlobals {
  document: {
    createElement(tag: string): ConsoleElement;
    getElementById(id: string): ConsoleElement | null;
    querySelectorAll(selector: string): ArrayLike<ConsoleElement>;
    readonly documentElement: ConsoleElement;
    addEventListener(type: string, listener: () => void): void;
  };
  sessionStorage: ConsoleStorage;
  location: { hash: string };
  addEventListener(type: string, listener: () => void): void;
}

/** The browser's globals: this module only ever runs in a page. */
export const browser = globalThis as unknown as BrowserGlobals;

/** The element with this id; the page has every id the modules name, so a missing one is a bug of the page. */
export function byId(id: string): ConsoleElement {
  const element = browser.document.getElementById(id);
  if (element === null) throw new Error(`the console page has no #${id}`);
  return element;
}

/** A new element with its class and content (text is never parsed as HTML). */
export function element(tag: string, options: { className?: string; text?: string; attributes?: Record<string, string> } = {}, ...children: Array<ConsoleElement | string>): ConsoleElement {
  const node = browser.document.createElement(tag);
  if (options.className !== undefined) node.className = options.className;
  if (options.text !== undefined) node.textContent = options.text;
  for (const [name, value] of Object.entries(options.attributes ?? {})) node.setAttribute(name, value);
  if (children.length > 0) node.append(...children);
  return node;
}
