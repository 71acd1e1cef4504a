(re) => {
  const skip = new Set(['SCRIPT', 'STYLE', 'NOSCRIPT', 'TEXTAREA', 'TITLE', 'OPTION', 'SELECT', 'MJX-CONTAINER', 'svg']);
  const cjk = new RegExp(re, 'gu');
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT, {acceptNode(node) {
    for (let e = node.parentElement; e; e = e.parentElement) {
      if (skip.has(e.tagName) || skip.has(e.nodeName) || e.hasAttribute('data-cjk-run')) return NodeFilter.FILTER_REJECT;
    }
    cjk.lastIndex = 0;
    return cjk.test(node.data) ? NodeFilter.FILTER_ACCEPT : NodeFilter.FILTER_REJECT;
  }});
  const nodes = [];
  while (walker.nextNode()) nodes.push(walker.currentNode);
  for (const node of nodes) {
    const parts = node.data.split(new RegExp('(' + re + '+)', 'u'));
    const frag = document.createDocumentFragment();
    for (const part of parts) {
      if (!part) continue;
      cjk.lastIndex = 0;
      if (cjk.test(part)) {
        const span = document.createElement('span');
        span.setAttribute('data-cjk-run', '');
        span.textContent = part;
        frag.appendChild(span);
      } else frag.appendChild(document.createTextNode(part));
    }
    node.replaceWith(frag);
  }
  return [...document.querySelectorAll('span[data-cjk-run]')].map(s => {
    const around = (s.parentElement.closest('p,li,dt,dd,td,th,h1,h2,h3,h4,h5,h6,pre,a,div') || s.parentElement).textContent;
    const i = around.indexOf(s.textContent);
    return {text: s.textContent, context: around.slice(Math.max(0, i - 40), i + s.textContent.length + 40).replace(/\s+/g, ' '),
            weight: getComputedStyle(s).fontWeight};
  });
}
