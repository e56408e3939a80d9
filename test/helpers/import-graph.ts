import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

/**
 * The static import graph of a source tree, for architecture tests: every `import … from`,
 * `import type … from`, `export … from` and side-effect import between the tree's own `.ts`
 * files, and lazy `import('…')` with a literal path. A lazy import cannot form an initialization
 * circle (it runs after module evaluation), but it is still a dependency: a lower module that
 * lazily imports an upper one hides an inversion, so the architecture tests count it.
 */

export interface ImportGraph {
  /** File (relative to the root) → files it imports (relative to the root). */
  readonly edges: ReadonlyMap<string, readonly string[]>;
}

const STATIC_IMPORT = /(?:^|[\s;])(?:import|export)\s+(?:type\s+)?(?:[\w*{}\s,$]+?\s+from\s+)?['"]([^'"]+)['"]/g;
const LAZY_IMPORT = /\bimport\(\s*['"]([^'"]+)['"]\s*\)/g;

function sourceFiles(dir: string, out: string[] = []): string[] {
  for (const name of readdirSync(dir)) {
    if (name === 'node_modules' || name === 'dist' || name.startsWith('.')) continue;
    const path = join(dir, name);
    if (statSync(path).isDirectory()) sourceFiles(path, out);
    else if (name.endsWith('.ts') && !name.endsWith('.d.ts')) out.push(path);
  }
  return out;
}

/** Comments may quote import lines; only code counts. */
function withoutComments(text: string): string {
  return text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/^\s*\/\/.*$/gm, '');
}

function resolveSpecifier(from: string, specifier: string): string | null {
  if (!specifier.startsWith('.')) return null;
  const base = resolve(dirname(from), specifier);
  for (const candidate of [base.replace(/\.js$/, '.ts'), `${base}.ts`, join(base, 'index.ts')]) {
    if (existsSync(candidate) && statSync(candidate).isFile()) return candidate;
  }
  return null;
}

/** Builds the graph of the `.ts` files under `dirs` (absolute or relative to `root`). */
export function importGraph(root: string, dirs: readonly string[]): ImportGraph {
  const edges = new Map<string, string[]>();
  for (const dir of dirs) {
    for (const file of sourceFiles(resolve(root, dir))) {
      const targets = new Set<string>();
      const code = withoutComments(readFileSync(file, 'utf8'));
      for (const match of [...code.matchAll(STATIC_IMPORT), ...code.matchAll(LAZY_IMPORT)]) {
        const target = resolveSpecifier(file, match[1] ?? '');
        if (target !== null) targets.add(relative(root, target));
      }
      edges.set(relative(root, file), [...targets].sort());
    }
  }
  return { edges };
}

/** Every import circle: strongly connected components of more than one file, or a file importing itself (Tarjan). */
export function importCircles(graph: ImportGraph): string[][] {
  let counter = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const circles: string[][] = [];

  const visit = (node: string): void => {
    index.set(node, counter);
    low.set(node, counter);
    counter += 1;
    stack.push(node);
    onStack.add(node);
    for (const next of graph.edges.get(node) ?? []) {
      if (!index.has(next)) {
        visit(next);
        low.set(node, Math.min(low.get(node) ?? 0, low.get(next) ?? 0));
      } else if (onStack.has(next)) {
        low.set(node, Math.min(low.get(node) ?? 0, index.get(next) ?? 0));
      }
    }
    if (low.get(node) === index.get(node)) {
      const component: string[] = [];
      let member: string | undefined;
      do {
        member = stack.pop();
        if (member === undefined) break;
        onStack.delete(member);
        component.push(member);
      } while (member !== node);
      const selfLoop = component.length === 1 && (graph.edges.get(node) ?? []).includes(node);
      if (component.length > 1 || selfLoop) circles.push(component.sort());
    }
  };
  for (const node of [...graph.edges.keys()].sort()) if (!index.has(node)) visit(node);
  return circles;
}

/** Layer order: a file may import its own layer or a later one, never an earlier one. */
export function layerViolations(graph: ImportGraph, layers: readonly string[]): string[] {
  const layerOf = (file: string): number => layers.findIndex((layer) => file === layer || file.startsWith(`${layer}/`));
  const violations: string[] = [];
  for (const [file, targets] of graph.edges) {
    const own = layerOf(file);
    if (own < 0) continue;
    for (const target of targets) {
      const theirs = layerOf(target);
      if (theirs >= 0 && theirs < own) violations.push(`${file} → ${target}`);
    }
  }
  return violations.sort();
}
