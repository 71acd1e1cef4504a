/* The book's own page behaviour (Jupyter Book adds every .js in _static/ to every page).
   tests/built/test_reading.py checks each part in Chromium. */
(function () {
  "use strict";

  /* 1. Phone navigation. Below 992 px the visible sidebar buttons are sphinx-book-theme's, in
     the article header, but pydata-sphinx-theme 0.17 binds its open-the-sidebar handler only
     to the FIRST element with class .primary-toggle / .secondary-toggle
     (document.querySelector), which is its own navbar button, hidden at that width. A tap on
     the visible button showed a tooltip and nothing else (pydata-sphinx-theme issue 2451,
     sphinx-book-theme 1.3.0 with pydata-sphinx-theme 0.17.1, both pinned in
     constraints.txt). A click on any other toggle is passed on to the bound one, so the
     theme's own dialog opens, and closes as the theme closes it. */
  function forwardToggle(selector) {
    var bound = document.querySelector(selector);
    if (!bound) return;
    document.querySelectorAll(selector).forEach(function (button) {
      if (button === bound) return;
      button.addEventListener("click", function (event) {
        event.preventDefault();
        event.stopPropagation();
        bound.click();
      });
    });
  }

  /* 2. Search snippets. Sphinx's search page shows for each hit the text of the page's
     [role=main] element around the first search term, or its start when the (stemmed) term
     does not occur as written; on these pages that start is the launch buttons ("Binder",
     "Colab") and the page's table of contents. The page furniture and the code are removed
     before the snippet is taken, so a snippet is always prose. */
  var NOT_PROSE = [
    ".bd-header-article", ".article-header-buttons", ".bd-sidebar-secondary",
    ".prev-next-area", ".bd-footer-article", ".cell_input", ".cell_output",
    "nav", ".toggle-details__summary", "button",
    "#jb-print-docs-body", ".onlyprint" // the print-only "Contents" list
  ].join(",");

  function proseSnippets() {
    // searchtools.js declares `const Search` at the top level: a global binding, not a
    // property of window
    var search = typeof Search === "undefined" ? null : Search; // eslint-disable-line no-undef
    if (!search || typeof search.htmlToText !== "function" || search.posencProse) return;
    var original = search.htmlToText;
    search.htmlToText = function (htmlString, anchor) {
      var doc = new DOMParser().parseFromString(htmlString, "text/html");
      doc.querySelectorAll(NOT_PROSE).forEach(function (el) { el.remove(); });
      var text = original.call(this, doc.documentElement.outerHTML, anchor);
      return text.replace(/\s+/g, " ").trim();
    };
    search.posencProse = true;
  }

  /* 3. Figures on a phone. A figure is drawn for the 672 px text column; on a 390 px screen
     it is shown at about half that size, its text too small to read. A tap on a figure that
     is shown smaller than it was drawn opens it at its drawn size in a dialog that scrolls
     sideways; a second tap (or Escape) closes it. */
  function drawnWidth(img) {
    var match = /width:\s*(\d+)px/.exec(img.getAttribute("style") || "");
    return match ? parseInt(match[1], 10) : img.naturalWidth;
  }

  function enlargeOnTap() {
    document.querySelectorAll("article.bd-article img").forEach(function (img) {
      if (img.closest(".jupyter-widgets, .bd-header-article") || !/_images\//.test(img.src)) return;
      img.classList.add("posenc-zoomable");
      img.addEventListener("click", function (event) {
        var full = drawnWidth(img);
        if (img.clientWidth >= full - 1) return; // shown at its drawn size: Sphinx's link
        // (Sphinx wraps a sized image in a link to the bare PNG, which would show it at
        // twice its size with no page around it)
        event.preventDefault();
        var dialog = document.createElement("dialog");
        dialog.className = "posenc-zoom";
        var big = document.createElement("img");
        big.src = img.src;
        big.alt = img.alt;
        big.style.width = full + "px";
        dialog.appendChild(big);
        document.body.appendChild(dialog);
        dialog.addEventListener("click", function () { dialog.close(); });
        dialog.addEventListener("close", function () { dialog.remove(); });
        dialog.showModal();
      });
    });
  }

  /* 4. Wide inline formulas (see span.math.posenc-wide-math in posenc.css). A formula is
     measured whenever its span changes size: once MathJax has typeset it, when a collapsed
     block around it opens, when the window narrows; and once more when MathJax's fonts are
     in. All widths are read first, then the classes set, so the page is laid out once. */
  function markWideMath() {
    var spans = Array.prototype.slice.call(document.querySelectorAll("span.math"));
    var wide = spans.map(function (span) {
      var math = span.querySelector("mjx-math");
      return !!math && math.getBoundingClientRect().width > span.clientWidth + 1;
    });
    spans.forEach(function (span, i) { span.classList.toggle("posenc-wide-math", wide[i]); });
  }

  function wideMath() {
    var spans = document.querySelectorAll("span.math");
    if (!spans.length || typeof ResizeObserver === "undefined") return;
    var frame = null;
    var observer = new ResizeObserver(function () {
      if (frame === null) {
        frame = requestAnimationFrame(function () { frame = null; markWideMath(); });
      }
    });
    spans.forEach(function (span) { observer.observe(span); });
    window.addEventListener("load", function () {
      var mj = window.MathJax;
      if (mj && mj.startup && mj.startup.promise) {
        mj.startup.promise.then(function () { return document.fonts.ready; }).then(markWideMath);
      }
    });
  }

  function setup() {
    forwardToggle(".primary-toggle");
    forwardToggle(".secondary-toggle");
    proseSnippets();
    enlargeOnTap();
    wideMath();
  }
  proseSnippets(); // before Sphinx's own DOMContentLoaded handler runs a query from the URL
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", setup);
  } else {
    setup();
  }
})();
