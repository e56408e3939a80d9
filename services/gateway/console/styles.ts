/** The web console's style sheet (GET /ui/console.css): system fonts, no images, high-contrast focus rings. */
export const CONSOLE_CSS = `:root { color-scheme: light; --ink: #15202b; --muted: #4a5866; --line: #c9d2dc; --bg: #f6f8fa; --card: #fff; --accent: #0b5cad; --bad: #a4161a; --ok: #1b6b33; --mark: #fde68a; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--ink); background: var(--bg); }
a { color: var(--accent); }
:focus-visible { outline: 3px solid #f59e0b; outline-offset: 2px; }
.skip { position: absolute; left: -999px; top: 0; background: var(--card); padding: .5rem; }
.skip:focus { left: .5rem; }
.visually-hidden { position: absolute; width: 1px; height: 1px; overflow: hidden; clip-path: inset(50%); white-space: nowrap; }
.top { display: flex; flex-wrap: wrap; align-items: center; gap: 1rem; padding: .6rem 1.25rem; background: #0f2740; color: #fff; }
.brand { margin: 0; font-weight: 700; }
.top nav ul { display: flex; gap: .25rem; list-style: none; margin: 0; padding: 0; }
.top nav a { color: #fff; text-decoration: none; padding: .35rem .7rem; border-radius: 6px; display: inline-block; }
.top nav a[aria-current="page"] { background: #fff; color: #0f2740; font-weight: 600; }
.top nav a:hover { text-decoration: underline; }
#forget-token { margin-left: auto; }
main { max-width: 72rem; margin: 0 auto; padding: 1rem 1.25rem 3rem; }
h1 { font-size: 1.5rem; margin: .5rem 0 1rem; }
h2 { font-size: 1.1rem; margin: 1.25rem 0 .5rem; }
.grid { display: flex; flex-wrap: wrap; gap: .75rem 1rem; align-items: flex-end; background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: .9rem; }
.stack { display: grid; gap: .5rem; max-width: 24rem; }
.field { display: grid; gap: .2rem; }
.field.wide { flex: 1 1 18rem; }
.field.check { display: flex; align-items: center; gap: .4rem; padding-bottom: .45rem; }
label { font-weight: 600; font-size: .9rem; }
.hint { font-weight: 400; color: var(--muted); }
input, select, button { font: inherit; padding: .4rem .55rem; border: 1px solid #8a99a8; border-radius: 6px; background: #fff; color: var(--ink); }
input[type="number"] { width: 6rem; }
button { background: var(--accent); color: #fff; border-color: var(--accent); cursor: pointer; font-weight: 600; }
button:disabled, select:disabled { opacity: .6; cursor: default; }
.status { color: var(--muted); min-height: 1.45em; }
.error { color: var(--bad); font-weight: 600; min-height: 1.45em; }
.split { display: grid; grid-template-columns: minmax(0, 3fr) minmax(0, 2fr); gap: 1rem; align-items: start; }
@media (max-width: 50rem) { .split { grid-template-columns: 1fr; } }
.hits { list-style: none; margin: 0; padding: 0; display: grid; gap: .6rem; }
.hit { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: .7rem .9rem; }
.hit h2 { margin: 0 0 .25rem; font-size: 1rem; }
.hit button { background: none; border: 0; padding: 0; color: var(--accent); text-decoration: underline; font-weight: 600; text-align: left; }
.meta { color: var(--muted); font-size: .85rem; margin: 0 0 .3rem; }
.hit p.excerpt { margin: 0; }
mark { background: var(--mark); color: inherit; padding: 0 .1em; border-radius: 2px; }
.detail { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: .9rem; position: sticky; top: .5rem; }
.detail h2 { margin-top: 0; }
.text { white-space: pre-wrap; max-height: 60vh; overflow: auto; }
.facts { display: grid; grid-template-columns: max-content 1fr; gap: .2rem .8rem; margin: 0 0 .6rem; font-size: .9rem; }
.facts dt { color: var(--muted); }
.facts dd { margin: 0; overflow-wrap: anywhere; }
table { width: 100%; border-collapse: collapse; background: var(--card); border: 1px solid var(--line); margin: .5rem 0 1.25rem; }
caption { text-align: left; color: var(--muted); padding: .4rem 0; }
th, td { text-align: left; padding: .45rem .6rem; border-bottom: 1px solid var(--line); vertical-align: top; }
td code, dd code { overflow-wrap: anywhere; }
progress, meter { width: 12rem; height: 1rem; }
.state-completed { color: var(--ok); font-weight: 600; }
.state-failed, .state-partial { color: var(--bad); font-weight: 600; }
.failures { margin: .3rem 0 0; padding-left: 1.1rem; font-size: .88rem; }
.failures code { color: var(--bad); }
`;
