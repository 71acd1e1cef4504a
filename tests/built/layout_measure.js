() => {
  const style = e => getComputedStyle(e);
  const scrolls = v => v === 'auto' || v === 'scroll';
  const clips = v => v === 'hidden' || v === 'clip';
  const rendered = e => e.getClientRects().length > 0 && style(e).visibility !== 'hidden';
  const oneLine = s => (s || '').replace(/\s+/g, ' ').trim().slice(0, 60);
  const name = e => e.tagName.toLowerCase() + [...e.classList].slice(0, 3).map(c => '.' + c).join('');
  const px = x => Math.round(x);
  const viewport = document.documentElement.clientWidth;
  const article = document.querySelector('article.bd-article') || document.querySelector('main') || document.body;
  const column = article.getBoundingClientRect().right;

  // TeX source of each typeset formula, to name it in messages.
  const tex = new Map();
  if (window.MathJax && MathJax.startup && MathJax.startup.document) {
    for (const item of MathJax.startup.document.math) tex.set(item.typesetRoot, item.math);
  }

  // Why (if at all) part of a formula can be neither seen nor scrolled to. A display formula's
  // mjx-container is its own box (it scrolls, posenc.css); an inline one's box is the theme's
  // span.math around it, which posenc.js lets scroll where the formula is wider than it: for an
  // inline formula only the typeset math (mjx-math; its glyph boxes stick out of it by a few
  // pixels) must be visible or reachable by scrolling a box around it.
  function clipped(m, inline) {
    const why = [];
    const cs = style(m), box = m.getBoundingClientRect();
    const content = (m.querySelector('mjx-math') || m).getBoundingClientRect();
    if (!inline && m.scrollWidth > m.clientWidth + 1 && !scrolls(cs.overflowX))
      why.push(`content ${m.scrollWidth} px wide in a ${m.clientWidth} px box that does not scroll (overflow-x: ${cs.overflowX})`);
    if (!inline && m.scrollHeight > m.clientHeight + 1 && clips(cs.overflowY))
      why.push(`content ${m.scrollHeight} px tall cut to ${m.clientHeight} px (overflow-y: ${cs.overflowY})`);
    // The span that must stay visible: the box if it scrolls, else the content itself.
    let left = inline ? content.left : scrolls(cs.overflowX) ? box.left : Math.min(box.left, content.left);
    let right = inline ? content.right : scrolls(cs.overflowX) ? box.right : Math.max(box.right, content.right);
    for (let a = m.parentElement; a && a !== document.body; a = a.parentElement) {
      const as = style(a);
      if (scrolls(as.overflowX)) {  // the rest is reachable by scrolling a; a itself must show
        const r = a.getBoundingClientRect();
        left = r.left; right = r.right;
      } else if (clips(as.overflowX)) {
        const r = a.getBoundingClientRect(), inner = r.left + a.clientLeft;
        if (right > inner + a.clientWidth + 1 || left < inner - 1) {
          why.push(`cut off by ${name(a)} (overflow-x: ${as.overflowX}): formula spans x = ${px(left)}..${px(right)} px, the box ${px(inner)}..${px(inner + a.clientWidth)} px`);
          break;
        }
      }
    }
    if (article.contains(m) && right > column + 1) why.push(`ends at ${px(right)} px, past the article column's right edge at ${px(column)} px`);
    if (right > viewport + 1 || left < -1) why.push(`spans x = ${px(left)}..${px(right)} px, outside the ${viewport} px viewport`);
    return why;
  }

  const formulas = [];
  for (const m of document.querySelectorAll('mjx-container[display="true"]')) {
    if (!rendered(m)) continue;
    const why = clipped(m, false);
    const text = tex.get(m) || (m.querySelector('mjx-assistive-mml') || m).textContent;
    formulas.push({text: oneLine(text), why, scrolls: m.scrollWidth > m.clientWidth + 1,
                   sw: m.scrollWidth, cw: m.clientWidth});
  }
  // Inline formulas (in the text, a table cell, a proof, a widget's label): `scrolls` when the
  // typeset math is wider than the span.math around it, which then has to scroll.
  const inlineFormulas = [];
  for (const m of document.querySelectorAll('mjx-container:not([display="true"])')) {
    if (!rendered(m)) continue;
    const why = clipped(m, true);
    const text = tex.get(m) || (m.querySelector('mjx-assistive-mml') || m).textContent;
    const box = m.closest('span.math') || m;
    const width = px((m.querySelector('mjx-math') || m).getBoundingClientRect().width);
    inlineFormulas.push({text: oneLine(text), why, scrolls: width > box.clientWidth + 1,
                         sw: width, cw: box.clientWidth});
  }

  // Code sources and outputs (MyST-NB cells, plain literal blocks).
  const pres = new Set(document.querySelectorAll('div.cell_input pre, div.cell_output pre, div.highlight pre, .output pre'));
  const blocks = [];
  let fit = null;  // in a code cell of the main text (boxes such as exercises are narrower)
  for (const pre of pres) {
    if (!rendered(pre)) continue;
    if (fit === null && pre.closest('div.cell_input') && !pre.closest('.admonition')) fit = fits(pre);
    if (pre.scrollWidth <= pre.clientWidth + 1) continue;
    const lines = pre.textContent.replace(/\n$/, '').split('\n');
    const longest = lines.reduce((a, b) => (b.length > a.length ? b : a), '');
    const cell = pre.closest('div.cell');
    const source = cell && cell.querySelector('div.cell_input pre');
    blocks.push({kind: pre.closest('div.cell_output, .output') ? 'output' : 'code',
                 cell: oneLine((source || pre).textContent.split('\n')[0]),
                 longest: longest.length, line: oneLine(longest), fits: fits(pre), sw: pre.scrollWidth, cw: pre.clientWidth});
  }

  // How many monospace characters a code block holds without scrolling.
  function fits(pre) {
    const probe = document.createElement('span');
    probe.textContent = '0'.repeat(200);
    pre.appendChild(probe);
    const char = probe.getBoundingClientRect().width / 200;
    probe.remove();
    const ps = style(pre);
    return Math.floor((pre.clientWidth - parseFloat(ps.paddingLeft) - parseFloat(ps.paddingRight)) / char);
  }

  // The page scrolling sideways, and the outermost elements that stick out of the viewport.
  const sw = document.scrollingElement.scrollWidth, iw = window.innerWidth;
  const culprits = [];
  if (sw > iw + 1) {
    for (const e of document.body.querySelectorAll('*')) {
      const r = e.getBoundingClientRect();
      const p = e.parentElement.getBoundingClientRect();
      if (r.right > iw + 1 && p.right <= iw + 1 && rendered(e))
        culprits.push(`${name(e)} "${oneLine(e.textContent)}" ends at ${px(r.right)} px`);
      if (culprits.length === 5) break;
    }
  }
  // Inline code (an argument name, a call in an exercise box) that runs past the text column.
  const inline = [...article.querySelectorAll('p code, li code, td code')]
    .filter(c => rendered(c) && c.getBoundingClientRect().right > column + 1)
    .map(c => `${oneLine(c.textContent)} ends at ${px(c.getBoundingClientRect().right)} px (column ${px(column)})`);
  return {formulas, inlineFormulas, blocks, page: {sw, iw, culprits}, fit, inline};
}
