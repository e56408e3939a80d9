/**
 * A small PromQL reader for the deployment tests: enough of the grammar to find, in the
 * expressions of the Grafana dashboards, the alert rules and the chart's KEDA triggers, every
 * metric selector (with its matchers and the functions it sits in) and every label list
 * (`by`, `without`, `on`, `ignoring`, `group_left`, `group_right`) with the selectors it applies to.
 * It is not a full parser: it does not check operator precedence or argument types, and it throws
 * on what it does not know (an unknown function, an unterminated string), so that a new construct
 * in a dashboard is noticed rather than skipped.
 */

export type MatchOp = '=' | '!=' | '=~' | '!~';

export interface Matcher {
  label: string;
  op: MatchOp;
  value: string;
}

export interface Selector {
  /** The series name as written (`shoal_request_seconds_bucket`). */
  metric: string;
  matchers: Matcher[];
  /** Functions and aggregations around it, innermost first. */
  within: string[];
}

export type LabelListKind = 'by' | 'without' | 'on' | 'ignoring' | 'group_left' | 'group_right';

export interface LabelList {
  kind: LabelListKind;
  labels: string[];
  /** The selectors it applies to: the aggregation's argument (by, without) or the whole expression. */
  scope: Selector[];
}

export interface ParsedExpression {
  selectors: Selector[];
  labelLists: LabelList[];
}

export const AGGREGATIONS = new Set(['sum', 'min', 'max', 'avg', 'group', 'stddev', 'stdvar', 'count', 'count_values', 'bottomk', 'topk', 'quantile', 'limitk', 'limit_ratio']);

/** Prometheus 3 functions (those with parentheses). */
export const FUNCTIONS = new Set([
  'abs', 'absent', 'absent_over_time', 'acos', 'acosh', 'asin', 'asinh', 'atan', 'atanh', 'avg_over_time', 'ceil', 'changes', 'clamp', 'clamp_max', 'clamp_min',
  'cos', 'cosh', 'count_over_time', 'day_of_month', 'day_of_week', 'day_of_year', 'days_in_month', 'deg', 'delta', 'deriv', 'exp', 'floor', 'histogram_avg',
  'histogram_count', 'histogram_fraction', 'histogram_quantile', 'histogram_stddev', 'histogram_stdvar', 'histogram_sum', 'holt_winters', 'double_exponential_smoothing',
  'hour', 'idelta', 'increase', 'irate', 'label_join', 'label_replace', 'last_over_time', 'ln', 'log10', 'log2', 'mad_over_time', 'max_over_time', 'min_over_time',
  'minute', 'month', 'pi', 'predict_linear', 'present_over_time', 'quantile_over_time', 'rad', 'rate', 'resets', 'round', 'scalar', 'sgn', 'sin', 'sinh', 'sort',
  'sort_desc', 'sort_by_label', 'sort_by_label_desc', 'sqrt', 'stddev_over_time', 'stdvar_over_time', 'sum_over_time', 'tan', 'tanh', 'time', 'timestamp', 'vector', 'year',
]);

const LABEL_LIST_KEYWORDS = new Set<string>(['by', 'without', 'on', 'ignoring', 'group_left', 'group_right']);
const OTHER_KEYWORDS = new Set(['and', 'or', 'unless', 'bool', 'atan2', 'inf', 'nan']);

type Token =
  | { t: 'ident'; v: string }
  | { t: 'braces'; matchers: Matcher[] }
  | { t: '(' }
  | { t: ')' }
  | { t: ',' }
  | { t: 'other' };

const IDENT = /^[a-zA-Z_:][a-zA-Z0-9_:]*/;
const DURATION = /^[0-9]+(ms|[smhdwy])([0-9]+(ms|[smhdwy]))*/;
const NUMBER = /^(0x[0-9a-fA-F]+|[0-9]*\.?[0-9]+([eE][+-]?[0-9]+)?)/;
const OPERATOR = /^(==|!=|>=|<=|=~|!~|[-+*/%^<>@])/;

/** The string literal starting at `start` (its quote): [value, index after it]. */
function readString(text: string, start: number): [string, number] {
  const quote = text[start];
  let value = '';
  let i = start + 1;
  while (i < text.length && text[i] !== quote) {
    if (text[i] === '\\' && quote !== '`') {
      value += text[i + 1] ?? '';
      i += 2;
    } else {
      value += text[i];
      i += 1;
    }
  }
  if (i >= text.length) throw new Error(`unterminated string in ${text}`);
  return [value, i + 1];
}

function readMatchers(text: string, start: number): [Matcher[], number] {
  const matchers: Matcher[] = [];
  let i = start + 1;
  for (;;) {
    while (/[\s,]/.test(text[i] ?? '')) i += 1;
    if (text[i] === '}') return [matchers, i + 1];
    const label = IDENT.exec(text.slice(i))?.[0];
    if (label === undefined) throw new Error(`bad label matcher at ${i} in ${text}`);
    i += label.length;
    while (/\s/.test(text[i] ?? '')) i += 1;
    const op = /^(=~|!~|!=|=)/.exec(text.slice(i))?.[0] as MatchOp | undefined;
    if (op === undefined) throw new Error(`no matcher operator after ${label} in ${text}`);
    i += op.length;
    while (/\s/.test(text[i] ?? '')) i += 1;
    if (!['"', "'", '`'].includes(text[i] ?? '')) throw new Error(`matcher ${label}${op} has no string value in ${text}`);
    const [value, next] = readString(text, i);
    matchers.push({ label, op, value });
    i = next;
  }
}

function tokenize(text: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < text.length) {
    const c = text[i] ?? '';
    const rest = text.slice(i);
    if (/\s/.test(c)) i += 1;
    else if (c === '#') i = text.indexOf('\n', i) === -1 ? text.length : text.indexOf('\n', i);
    else if (c === '{') {
      const [matchers, next] = readMatchers(text, i);
      tokens.push({ t: 'braces', matchers });
      i = next;
    } else if (c === '[') {
      // A range or subquery: durations and Grafana's $__rate_interval, no selectors.
      const end = text.indexOf(']', i);
      if (end === -1) throw new Error(`unterminated range in ${text}`);
      i = end + 1;
    } else if (c === '(' || c === ')' || c === ',') {
      tokens.push({ t: c });
      i += 1;
    } else if (c === '"' || c === "'" || c === '`') {
      i = readString(text, i)[1];
      tokens.push({ t: 'other' });
    } else if (DURATION.test(rest)) {
      i += DURATION.exec(rest)?.[0].length ?? 1;
      tokens.push({ t: 'other' });
    } else if (NUMBER.test(rest)) {
      i += NUMBER.exec(rest)?.[0].length ?? 1;
      tokens.push({ t: 'other' });
    } else if (IDENT.test(rest)) {
      const v = IDENT.exec(rest)?.[0] ?? '';
      tokens.push({ t: 'ident', v });
      i += v.length;
    } else if (OPERATOR.test(rest)) {
      i += OPERATOR.exec(rest)?.[0].length ?? 1;
      tokens.push({ t: 'other' });
    } else throw new Error(`unexpected ${JSON.stringify(c)} at ${i} in ${text}`);
  }
  return tokens;
}

interface Frame {
  /** A function or aggregation name; null for a plain parenthesis. */
  name: string | null;
  firstSelector: number;
  /** A prefix `by (...)`/`without (...)` waiting for this aggregation's argument. */
  pending: LabelList | null;
}

/** The selectors and label lists of one PromQL expression. */
export function parsePromQL(expr: string): ParsedExpression {
  const tokens = tokenize(expr);
  const selectors: Selector[] = [];
  const labelLists: LabelList[] = [];
  const wholeExpression: LabelList[] = [];
  const stack: Frame[] = [];
  let lastClosed: { frame: Frame; selectors: Selector[] } | null = null;

  const readLabelList = (at: number): [string[], number] => {
    if (tokens[at]?.t !== '(') return [[], at];
    const labels: string[] = [];
    let i = at + 1;
    for (; tokens[i]?.t !== ')'; i += 1) {
      const token = tokens[i];
      if (token === undefined) throw new Error(`unterminated label list in ${expr}`);
      if (token.t === 'ident') labels.push(token.v);
      else if (token.t !== ',') throw new Error(`unexpected token in a label list of ${expr}`);
    }
    return [labels, i + 1];
  };

  for (let i = 0; i < tokens.length; ) {
    const token = tokens[i];
    if (token === undefined) break;
    const next = tokens[i + 1];
    if (token.t === '(') {
      stack.push({ name: null, firstSelector: selectors.length, pending: null });
      i += 1;
    } else if (token.t === ')') {
      const frame = stack.pop();
      if (frame === undefined) throw new Error(`unbalanced ) in ${expr}`);
      const inside = selectors.slice(frame.firstSelector);
      if (frame.pending !== null) frame.pending.scope = inside;
      lastClosed = { frame, selectors: inside };
      i += 1;
    } else if (token.t === 'braces') {
      const name = token.matchers.find((m) => m.label === '__name__' && m.op === '=');
      if (name === undefined) throw new Error(`a selector without a metric name in ${expr}`);
      selectors.push({ metric: name.value, matchers: token.matchers.filter((m) => m !== name), within: stack.flatMap((f) => (f.name === null ? [] : [f.name])).reverse() });
      i += 1;
    } else if (token.t === 'ident') {
      const word = token.v;
      const lower = word.toLowerCase();
      if (LABEL_LIST_KEYWORDS.has(lower)) {
        const [labels, after] = readLabelList(i + 1);
        const list: LabelList = { kind: lower as LabelListKind, labels, scope: [] };
        labelLists.push(list);
        const previous = tokens[i - 1];
        if ((lower === 'by' || lower === 'without') && previous?.t === 'ident' && AGGREGATIONS.has(previous.v)) {
          // `sum by (a) (...)`: the aggregation's argument follows.
          if (tokens[after]?.t !== '(') throw new Error(`${previous.v} ${lower} (...) has no argument in ${expr}`);
          stack.push({ name: previous.v, firstSelector: selectors.length, pending: list });
          i = after + 1;
          continue;
        }
        if ((lower === 'by' || lower === 'without') && previous?.t === ')' && lastClosed?.frame.name !== null && AGGREGATIONS.has(lastClosed?.frame.name ?? '')) {
          // `sum (...) by (a)`: the argument just closed.
          list.scope = lastClosed?.selectors ?? [];
        } else if (lower === 'by' || lower === 'without') {
          throw new Error(`${lower} (...) not attached to an aggregation in ${expr}`);
        } else wholeExpression.push(list);
        i = after;
      } else if (AGGREGATIONS.has(word) && (next?.t === '(' || (next?.t === 'ident' && ['by', 'without'].includes(next.v.toLowerCase())))) {
        if (next.t === '(') {
          stack.push({ name: word, firstSelector: selectors.length, pending: null });
          i += 2;
        } else i += 1;
      } else if (next?.t === '(') {
        if (!FUNCTIONS.has(word)) throw new Error(`unknown PromQL function ${word}() in ${expr}`);
        stack.push({ name: word, firstSelector: selectors.length, pending: null });
        i += 2;
      } else if (lower === 'offset') {
        i += 2;
      } else if (OTHER_KEYWORDS.has(lower)) {
        i += 1;
      } else {
        const braces = next?.t === 'braces' ? next : null;
        selectors.push({ metric: word, matchers: braces?.matchers ?? [], within: stack.flatMap((f) => (f.name === null ? [] : [f.name])).reverse() });
        i += braces === null ? 1 : 2;
      }
    } else i += 1;
  }
  if (stack.length > 0) throw new Error(`unbalanced ( in ${expr}`);
  for (const list of wholeExpression) list.scope = selectors;
  return { selectors, labelLists };
}
