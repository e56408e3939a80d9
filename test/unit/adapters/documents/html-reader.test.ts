import { describe, expect, it } from 'vitest';
import { readHtml } from '../../../../adapters/documents/html-reader.js';

const PAGE = `<!DOCTYPE html>
<html><head><title>  Tide   tables </title><style>p { color: red }</style>
<script>var hidden = "do not index";</script></head>
<body>
<nav>Home | About</nav>
<h1>Velmora <em>harbour</em></h1>
<p>Ships   enter at
high tide.<br>Pilots board at the buoy.</p>
<div>First block</div><div>Second block</div>
<ul><li>one</li><li>two</li></ul>
<table><tr><td>Mon</td><td>06:10</td></tr><tr><td>Tue</td><td>06:55</td></tr></table>
<h2>Fees &amp; dues</h2>
<pre>  keep   this
  spacing</pre>
<template><p>never shown</p></template><noscript>enable js</noscript>
<p>Caf&eacute; at the <a href="#">pier</a>.</p>
</body></html>`;

describe('HTML visible text', () => {
  const html = readHtml(PAGE);

  it('keeps the visible text with block elements on their own lines and inline elements inline', () => {
    expect(html.text).toBe(
      [
        'Home | About',
        '',
        'Velmora harbour',
        '',
        'Ships enter at high tide.',
        'Pilots board at the buoy.',
        '',
        'First block',
        'Second block',
        '',
        'one',
        'two',
        '',
        'Mon 06:10',
        'Tue 06:55',
        '',
        'Fees & dues',
        '',
        '  keep   this\n  spacing',
        '',
        'Café at the pier.',
      ].join('\n'),
    );
  });

  it('drops script, style, head, template and noscript content', () => {
    for (const hidden of ['do not index', 'color: red', 'never shown', 'enable js']) expect(html.text).not.toContain(hidden);
  });

  it('drops elements a browser does not render: the hidden attribute and an inline display: none', () => {
    const page = readHtml('<body><p>Shown text.</p><div hidden><p>secret draft</p><input hidden value="x"></div><span style="color: red; display:none">tracking pixel note</span><p style="display: block">Also shown.</p></body>');
    expect(page.text).toBe('Shown text.\n\nAlso shown.');
  });

  it('returns <title> as the title and h1..h6 as headings at their offsets', () => {
    expect(html.title).toBe('Tide tables');
    expect(html.headings.map((heading) => heading.text)).toEqual(['Velmora harbour', 'Fees & dues']);
    for (const heading of html.headings) expect(html.text.slice(heading.offset, heading.offset + heading.text.length)).toBe(heading.text);
  });

  it('a page with no visible text is empty', () => {
    expect(() => readHtml('<html><head><title>t</title></head><body><script>x()</script></body></html>')).toThrow(/no text/);
  });
});
