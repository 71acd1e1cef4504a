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

  /* 1b. The sidebars on a phone are the theme's modal dialogs. A tap on a section of the page
     ("Contents", the secondary sidebar) scrolled the page to it behind the dialog, which
     stayed open over it. A link that stays on this page now closes its dialog first; once
     the theme has put the sidebar back and returned the focus to the button that opened it
     (its own "close" handler, which would otherwise scroll the page back to that button),
     the page goes to the section and the keyboard's place moves on to its heading. */
  function closeOnSectionLink(dialogId) {
    var dialog = document.getElementById(dialogId);
    if (!dialog) return;
    dialog.addEventListener("click", function (event) {
      var link = event.target.closest && event.target.closest("a[href]");
      if (!link || !dialog.open || !link.hash) return;
      if (link.origin + link.pathname !== location.origin + location.pathname) return;
      var target = document.getElementById(decodeURIComponent(link.hash.slice(1)));
      if (!target) return;
      event.preventDefault();
      dialog.addEventListener("close", function () {
        if (location.hash === link.hash) target.scrollIntoView();
        else location.hash = link.hash;
        var heading = target.matches("section")
          ? target.querySelector("h1, h2, h3, h4, h5, h6") || target : target;
        if (!heading.hasAttribute("tabindex")) heading.setAttribute("tabindex", "-1");
        heading.focus({preventScroll: true});
      }, {once: true});
      dialog.close();
    }, true); // before the theme's own click handler, which closes the dialog on a click
    // outside it, as it takes a link followed with Enter (a click at 0, 0) to be
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

  /* 2b. Formulas in a snippet. The snippet is the page's HTML text before MathJax has run,
     so a formula read as its TeX: "\\(\\theta_i = b^{-2i/d}\\)". Each span.math / div.math is
     replaced by a plain-text reading of its TeX before the text is taken: "θᵢ = b^(−2i/d)"
     (Greek letters and operators as characters, \\frac{a}{b} as a/b, scripts as Unicode
     sub/superscripts where every character has one, else as _(...) and ^(...)). */
  var TEX_SYMBOLS = {
    alpha: "α", beta: "β", gamma: "γ", delta: "δ", epsilon: "ε", varepsilon: "ε", zeta: "ζ",
    eta: "η", theta: "θ", vartheta: "ϑ", iota: "ι", kappa: "κ", lambda: "λ", mu: "μ", nu: "ν",
    xi: "ξ", pi: "π", rho: "ρ", sigma: "σ", tau: "τ", phi: "φ", varphi: "φ", chi: "χ",
    psi: "ψ", omega: "ω", Gamma: "Γ", Delta: "Δ", Theta: "Θ", Lambda: "Λ", Xi: "Ξ", Pi: "Π",
    Sigma: "Σ", Phi: "Φ", Psi: "Ψ", Omega: "Ω", cdot: "·", times: "×", le: "≤", leq: "≤",
    ge: "≥", geq: "≥", ne: "≠", neq: "≠", approx: "≈", sim: "∼", equiv: "≡", to: "→",
    rightarrow: "→", leftarrow: "←", Rightarrow: "⇒", mapsto: "↦", infty: "∞", sum: "Σ",
    prod: "∏", int: "∫", in: "∈", notin: "∉", ldots: "…", dots: "…", cdots: "⋯", pm: "±",
    mp: "∓", top: "⊤", langle: "⟨", rangle: "⟩", lVert: "‖", rVert: "‖", Vert: "‖", "|": "‖",
    mid: "|", vert: "|", lvert: "|", rvert: "|", lfloor: "⌊", rfloor: "⌋", lceil: "⌈",
    rceil: "⌉", partial: "∂", nabla: "∇", circ: "∘", ast: "∗", star: "⋆", prime: "′",
    ll: "≪", gg: "≫", subset: "⊂", cup: "∪", cap: "∩", forall: "∀", exists: "∃",
    otimes: "⊗", oplus: "⊕", odot: "⊙", propto: "∝", emptyset: "∅", quad: " ", qquad: " ",
    ";": " ", " ": " ", ",": " ", "!": "", ":": " ", "{": "{", "}": "}", "%": "%", "_": "_",
    "#": "#", "&": "&", "$": "$", left: "", right: "", big: "", Big: "", bigg: "", Bigg: "",
    bigl: "", bigr: "", Bigl: "", Bigr: "", displaystyle: "", textstyle: "", limits: "",
    nolimits: ""
  };
  var TEX_FRACTIONS = {frac: 1, tfrac: 1, dfrac: 1};
  var SUP = "0⁰1¹2²3³4⁴5⁵6⁶7⁷8⁸9⁹+⁺-⁻−⁻=⁼(⁽)⁾a\u1d43b\u1d47c\u1d9cd\u1d48e\u1d49" +
    "f\u1da0g\u1d4dh\u02b0i\u2071j\u02b2k\u1d4fl\u02e1m\u1d50n\u207fo\u1d52p\u1d56" +
    "r\u02b3s\u02e2t\u1d57u\u1d58v\u1d5bw\u02b7x\u02e3y\u02b8z\u1dbb⊤\u1d40T\u1d40′′";
  var SUB = "0₀1₁2₂3₃4₄5₅6₆7₇8₈9₉+₊-₋−₋=₌(₍)₎a\u2090e\u2091h\u2095i\u1d62j\u2c7c" +
    "k\u2096l\u2097m\u2098n\u2099o\u2092p\u209ar\u1d63s\u209bt\u209cu\u1d64v\u1d65x\u2093";

  function scriptMap(pairs) {
    var map = {};
    for (var i = 0; i < pairs.length; i += 2) map[pairs[i]] = pairs[i + 1];
    return map;
  }
  var SCRIPTS = {"^": scriptMap(SUP), "_": scriptMap(SUB)};

  function texToText(tex) {
    var i = 0;
    function group() { // one argument: {...}, \command or a character
      while (tex[i] === " ") i++;
      if (tex[i] === "{") {
        i++;
        var out = seq("}");
        i++;
        return out;
      }
      return atom();
    }
    function atom() {
      var c = tex[i++];
      if (c === undefined) return "";
      if (c === "\\") {
        var m = /^([A-Za-z]+|.)/.exec(tex.slice(i));
        if (!m) return "";
        i += m[0].length;
        var name = m[0];
        if (name in TEX_SYMBOLS) return TEX_SYMBOLS[name];
        if (name in TEX_FRACTIONS) {
          var a = group(), b = group();
          return wrap(a) + "/" + wrap(b);
        }
        if (name === "sqrt") return "√" + wrap(group());
        // \text{..}, \mathrm{..}, \operatorname{..}, \hat{..} ...: their argument; \log: "log"
        if (tex[i] === "{") return group();
        // a function name (\\log, \\max) keeps a space before a following letter
        if (!/^[A-Za-z]/.test(name)) return name;
        return /^\s*[A-Za-z0-9\\]/.test(tex.slice(i)) ? name + " " : name;
      }
      if (c === "^" || c === "_") return script(c, group());
      if (c === "{") { var inner = seq("}"); i++; return inner; }
      if (c === "~") return " ";
      if (c === "-") return "−";
      return c;
    }
    function seq(end) {
      var out = "";
      while (i < tex.length && tex[i] !== end) out += atom();
      return out;
    }
    return seq(undefined).replace(/\s+/g, " ").replace(/([(⟨[]) | ([,.;:)⟩\]}])/g, "$1$2").trim();
  }
  function wrap(text) {
    text = text.trim();
    return /^[\w\u0370-\u03ff.′√]+$/.test(text) ? text : "(" + text + ")";
  }
  function script(kind, text) {
    text = text.trim();
    var map = SCRIPTS[kind], out = "";
    for (var k = 0; k < text.length; k++) {
      if (!(text[k] in map)) return kind + wrap(text);
      out += map[text[k]];
    }
    return out;
  }

  function mathAsText(doc) {
    doc.querySelectorAll("span.math, div.math").forEach(function (el) {
      var tex = el.textContent.trim()
        .replace(/^\\\(|\\\)$/g, "").replace(/^\\\[|\\\]$/g, "").replace(/^\$\$?|\$\$?$/g, "");
      var text = texToText(tex);
      el.textContent = el.tagName === "DIV" ? " " + text + " " : text;
    });
  }

  function proseSnippets() {
    // searchtools.js declares `const Search` at the top level: a global binding, not a
    // property of window
    var search = typeof Search === "undefined" ? null : Search; // eslint-disable-line no-undef
    if (!search || typeof search.htmlToText !== "function" || search.posencProse) return;
    var original = search.htmlToText;
    search.htmlToText = function (htmlString, anchor) {
      var doc = new DOMParser().parseFromString(htmlString, "text/html");
      doc.querySelectorAll(NOT_PROSE).forEach(function (el) { el.remove(); });
      mathAsText(doc);
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
    // MyST-NB writes the drawn size into the style; a figure with a phone rendition
    // (_ext/figure_renditions.py, a <picture>) carries it as width and height attributes
    // of its <img>, whose src stays the full drawing (currentSrc is the phone's)
    var match = /width:\s*(\d+)px/.exec(img.getAttribute("style") || "");
    if (match) return parseInt(match[1], 10);
    var width = parseInt(img.getAttribute("width") || "", 10);
    return width > 0 ? width : img.naturalWidth;
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
        big.src = img.src; // the full drawing, also where the phone's rendition is shown
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

  /* 4. Wide formulas (posenc.css). An inline formula wider than its span gets the class
     posenc-wide-math and scrolls in its own box; a display formula scrolls in its own box
     already. Either fades out at an edge past which more of it is hidden (posenc-more-right,
     posenc-more-left, updated as it scrolls): on a phone nothing else shows that it goes on,
     since the scrollbar appears only while it moves. A formula is measured whenever its
     span or div.math changes size: once MathJax has typeset it, when a collapsed block
     around it opens, when the window narrows; and once more when MathJax's fonts are in.
     Widths are read before classes are set, so the page is laid out once per step. */
  var MORE_PX = 6; // hidden this far or less, an edge does not fade (glyphs poke out a little)

  function markMore(box, state) {
    box.classList.toggle("posenc-more-right", state[0] > MORE_PX);
    box.classList.toggle("posenc-more-left", state[1] > MORE_PX);
  }

  function scrollState(box) {
    return [box.scrollWidth - box.clientWidth - box.scrollLeft, box.scrollLeft];
  }

  function onFormulaScroll(event) {
    markMore(event.currentTarget, scrollState(event.currentTarget));
  }

  function markWideMath() {
    var spans = Array.prototype.slice.call(document.querySelectorAll("span.math"));
    var wide = spans.map(function (span) {
      var math = span.querySelector("mjx-math");
      return !!math && math.getBoundingClientRect().width > span.clientWidth + 1;
    });
    spans.forEach(function (span, i) {
      span.classList.toggle("posenc-wide-math", wide[i]);
      if (!wide[i]) span.classList.remove("posenc-more-right", "posenc-more-left");
    });
    var boxes = Array.prototype.slice.call(document.querySelectorAll(
      "span.math.posenc-wide-math, mjx-container[jax='CHTML'][display='true']"));
    var states = boxes.map(scrollState);
    boxes.forEach(function (box, i) {
      markMore(box, states[i]);
      if (!box.posencScrollWatched) {
        box.addEventListener("scroll", onFormulaScroll, {passive: true});
        box.posencScrollWatched = true;
      }
    });
  }

  function wideMath() {
    var holders = document.querySelectorAll("span.math, div.math");
    if (!holders.length || typeof ResizeObserver === "undefined") return;
    var frame = null;
    var observer = new ResizeObserver(function () {
      if (frame === null) {
        frame = requestAnimationFrame(function () { frame = null; markWideMath(); });
      }
    });
    holders.forEach(function (holder) { observer.observe(holder); });
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
    closeOnSectionLink("pst-primary-sidebar-modal");
    closeOnSectionLink("pst-secondary-sidebar-modal");
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
