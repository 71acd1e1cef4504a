(re) => {
  const cjk = new RegExp(re, 'gu');
  const found = new Set();
  const add = (s) => { for (const m of (s || '').matchAll(cjk)) found.add(m[0]); };
  const walker = document.createTreeWalker(document, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) add(walker.currentNode.data);
  for (const e of document.querySelectorAll('*')) for (const a of e.attributes) add(a.value);
  const walk = (v) => { if (typeof v === 'string') add(v);
    else if (v && typeof v === 'object') for (const [k, x] of Object.entries(v)) { add(k); walk(x); } };
  for (const s of document.querySelectorAll('script[type="application/vnd.jupyter.widget-state+json"]'))
    walk(JSON.parse(s.textContent));
  return [...found];
}
