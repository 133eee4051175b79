// In-page search of the runbook wiki: the same ranking as `llmdoctor wiki search`.
//
// The index (window.LLMDOCTOR_INDEX, from search-index.js) is built from the wiki's SQLite FTS5
// index when the site is built, so documents are tokenized and stemmed by SQLite itself. Here the
// query is cut into words as llmdoctor/wiki/query.py does, each word stemmed as SQLite's porter
// tokenizer does, and entries are ranked as llmdoctor/wiki/search.py ranks them: signature
// matches first, then (for a few typed words) entries holding every word, an entry whose id, title
// or an alias is the query, entries whose id, title, aliases or tags hold the words as typed, then
// bm25.
"use strict";

(function () {
  const K1 = 1.2;
  const B = 0.75;
  const MAX_QUERY_CHARS = 200000;
  const MAX_TERMS = 64;
  const SHORT_QUERY_WORDS = 8;
  const MIN_CANDIDATES = 20;
  const MAX_WORD_BY_WORD_TERMS = 12;
  const MAX_WORD_BY_WORD_HITS = 20000;
  const CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff";
  const CJK_RUN = new RegExp("[" + CJK + "]+", "gu");
  const CJK_FULL = new RegExp("^[" + CJK + "]+$", "u");
  const URL_RE = /\b[a-zA-Z][a-zA-Z0-9+.-]*:\/\/\S+/gu;
  const PATH_RE = /(?:[A-Za-z]:)?(?:[\\/][\p{L}\p{N}_.@+~-]+){2,}[\\/]?/gu;
  const FRAME_RE = /^\s*File "[^"\n]*", line \d+/u;
  const HEXLIKE = /^(?:0x[0-9a-f]+|(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{6,})$/;
  const WORD_RE = /[\p{L}\p{N}]+/gu;
  const ERRORISH =
    /error|exception|fail|fatal|critical|killed|refused|time[ds]? ?out|denied|invalid|cannot|unable|not found|xid|panic/i;
  // llmdoctor/wiki/query.py's STOPWORDS and TYPED_FILLER, copied into the index when the site
  // is built
  let STOPWORDS = new Set();
  let TYPED_FILLER = new Set();
  let POD_STATES = new Set();
  let HANG_WORDS = new Set();
  const LITERAL_WORD = /[A-Za-z]{4,}/g;
  // typed symptom words -> the words runbooks use (llmdoctor/wiki/query.py SYMPTOMS, copied into
  // the index when the site is built, so there is one table)
  let SYMPTOMS = {};
  const ESCAPE = /\\./g;

  // ---- SQLite FTS5's porter stemmer, on UTF-8 bytes as SQLite runs it -------------------------

  function isVowel(c, yIsVowel) {
    return c === 97 || c === 101 || c === 105 || c === 111 || c === 117 || (yIsVowel && c === 121);
  }
  // index after the first vowel-then-consonant sequence of stem[0:n], or 0 when there is none
  function gobbleVC(s, start, n, prevCons) {
    let cons = prevCons;
    let i = start;
    for (; i < n; i++) {
      cons = !isVowel(s[i], cons);
      if (!cons) break;
    }
    for (i++; i < n; i++) {
      cons = !isVowel(s[i], cons);
      if (cons) return i + 1 - start;
    }
    return 0;
  }
  const mGt0 = (s, n) => gobbleVC(s, 0, n, false) !== 0;
  function mGt1(s, n) {
    const k = gobbleVC(s, 0, n, false);
    return k !== 0 && gobbleVC(s, k, n, true) !== 0;
  }
  function mEq1(s, n) {
    const k = gobbleVC(s, 0, n, false);
    return k !== 0 && gobbleVC(s, k, n, true) === 0;
  }
  function oStar(s, n) {
    const last = s[n - 1];
    if (last === 119 || last === 120 || last === 121) return false;
    let mask = 0;
    let cons = false;
    for (let i = 0; i < n; i++) {
      cons = !isVowel(s[i], cons);
      mask = ((mask << 1) + (cons ? 1 : 0)) & 0xffff;
    }
    return (mask & 7) === 5;
  }
  function hasVowel(s, n) {
    for (let i = 0; i < n; i++) if (isVowel(s[i], i > 0)) return true;
    return false;
  }
  const mGt1ST = (s, n) => (s[n - 1] === 115 || s[n - 1] === 116) && mGt1(s, n);

  function endsWith(s, n, suffix) {
    const k = suffix.length;
    if (n <= k) return false; // SQLite requires the stem to be non-empty
    for (let i = 0; i < k; i++) if (s[n - k + i] !== suffix.charCodeAt(i)) return false;
    return true;
  }
  function replace(s, n, k, out) {
    for (let i = 0; i < out.length; i++) s[n - k + i] = out.charCodeAt(i);
    return n - k + out.length;
  }
  // rules: [suffix, condition, replacement]; the first suffix that matches decides, as in SQLite
  // (the C code switches on the second-to-last letter, then tries each suffix of that group)
  function applyRules(s, n, groups) {
    const group = groups[String.fromCharCode(s[n - 2])];
    if (!group) return n;
    for (const [suffix, cond, out] of group) {
      if (endsWith(s, n, suffix)) {
        return cond(s, n - suffix.length) ? replace(s, n, suffix.length, out) : n;
      }
    }
    return n;
  }
  const STEP2 = {
    a: [["ational", mGt0, "ate"], ["tional", mGt0, "tion"]],
    c: [["enci", mGt0, "ence"], ["anci", mGt0, "ance"]],
    e: [["izer", mGt0, "ize"]],
    g: [["logi", mGt0, "log"]],
    l: [["bli", mGt0, "ble"], ["alli", mGt0, "al"], ["entli", mGt0, "ent"], ["eli", mGt0, "e"],
      ["ousli", mGt0, "ous"]],
    o: [["ization", mGt0, "ize"], ["ation", mGt0, "ate"], ["ator", mGt0, "ate"]],
    s: [["alism", mGt0, "al"], ["iveness", mGt0, "ive"], ["fulness", mGt0, "ful"],
      ["ousness", mGt0, "ous"]],
    t: [["aliti", mGt0, "al"], ["iviti", mGt0, "ive"], ["biliti", mGt0, "ble"]],
  };
  const STEP3 = {
    a: [["ical", mGt0, "ic"]],
    s: [["ness", mGt0, ""]],
    t: [["icate", mGt0, "ic"], ["iciti", mGt0, "ic"]],
    u: [["ful", mGt0, ""]],
    v: [["ative", mGt0, ""]],
    z: [["alize", mGt0, "al"]],
  };
  const STEP4 = {
    a: [["al", mGt1, ""]],
    c: [["ance", mGt1, ""], ["ence", mGt1, ""]],
    e: [["er", mGt1, ""]],
    i: [["ic", mGt1, ""]],
    l: [["able", mGt1, ""], ["ible", mGt1, ""]],
    n: [["ant", mGt1, ""], ["ement", mGt1, ""], ["ment", mGt1, ""], ["ent", mGt1, ""]],
    o: [["ion", mGt1ST, ""], ["ou", mGt1, ""]],
    s: [["ism", mGt1, ""]],
    t: [["ate", mGt1, ""], ["iti", mGt1, ""]],
    u: [["ous", mGt1, ""]],
    v: [["ive", mGt1, ""]],
    z: [["ize", mGt1, ""]],
  };

  function stemBytes(s, n) {
    // step 1a
    if (s[n - 1] === 115) {
      if (s[n - 2] === 101) {
        if ((n > 4 && s[n - 4] === 115 && s[n - 3] === 115) || (n > 3 && s[n - 3] === 105)) n -= 2;
        else n -= 1;
      } else if (s[n - 2] !== 115) {
        n -= 1;
      }
    }
    // step 1b
    let removed = false;
    if (s[n - 2] === 101) {
      if (endsWith(s, n, "eed")) {
        if (mGt0(s, n - 3)) n = replace(s, n, 3, "ee");
      } else if (endsWith(s, n, "ed") && hasVowel(s, n - 2)) {
        n -= 2;
        removed = true;
      }
    } else if (s[n - 2] === 110 && endsWith(s, n, "ing") && hasVowel(s, n - 3)) {
      n -= 3;
      removed = true;
    }
    if (removed) {
      const before = n;
      if (endsWith(s, n, "at")) n = replace(s, n, 2, "ate");
      else if (endsWith(s, n, "bl")) n = replace(s, n, 2, "ble");
      else if (endsWith(s, n, "iz")) n = replace(s, n, 2, "ize");
      if (n === before) {
        const c = s[n - 1];
        if (!isVowel(c, false) && c !== 108 && c !== 115 && c !== 122 && c === s[n - 2]) n -= 1;
        else if (mEq1(s, n) && oStar(s, n)) s[n++] = 101;
      }
    }
    // step 1c
    if (s[n - 1] === 121 && hasVowel(s, n - 1)) s[n - 1] = 105;
    n = applyRules(s, n, STEP2);
    n = applyRules(s, n, STEP3);
    n = applyRules(s, n, STEP4);
    // step 5a
    if (s[n - 1] === 101 && (mGt1(s, n - 1) || (mEq1(s, n - 1) && !oStar(s, n - 1)))) n -= 1;
    // step 5b
    if (n > 1 && s[n - 1] === 108 && s[n - 2] === 108 && mGt1(s, n - 1)) n -= 1;
    return n;
  }

  const encoder = new TextEncoder();
  const decoder = new TextDecoder();

  // a token as FTS5's "porter unicode61 remove_diacritics 2" indexes it
  function stem(word) {
    const folded = word.toLowerCase().normalize("NFD").replace(/\p{Mn}/gu, "");
    const bytes = encoder.encode(folded);
    if (bytes.length < 3 || bytes.length > 64) return folded;
    const buf = new Uint8Array(bytes.length + 8);
    buf.set(bytes);
    const n = stemBytes(buf, bytes.length);
    return decoder.decode(buf.subarray(0, n));
  }

  // ---- the query, as llmdoctor/wiki/query.py cuts it ---------------------------------------

  function runGrams(run) {
    const chars = Array.from(run);
    if (chars.length === 1) return [run];
    const grams = [];
    for (let i = 0; i + 1 < chars.length; i++) grams.push(chars[i] + chars[i + 1]);
    return grams;
  }

  // [the lines searched, whether the text is traceback frames alone] (query.py _candidate_lines)
  function candidateLines(text) {
    const kept = [];
    let skipNext = false;
    const all = text.split(/\r\n|\r|\n/);
    for (const line of all) {
      if (skipNext) {
        skipNext = false;
        if (line.startsWith(" ") || line.startsWith("\t")) continue;
      }
      if (FRAME_RE.test(line)) {
        skipNext = true;
        continue;
      }
      if (line.trim() === "Traceback (most recent call last):") continue;
      kept.push(line);
    }
    if (!kept.some((l) => l.trim())) return [all, text.trim() !== ""];
    if (kept.length < 2) return [kept, false];
    return [kept.filter((l) => ERRORISH.test(l)).concat(kept.filter((l) => !ERRORISH.test(l))), false];
  }

  function parseQuery(raw) {
    const text = (raw || "").slice(-MAX_QUERY_CHARS);
    const q = {
      text, words: [], cjkRuns: [], grams: [], short: false, phrase: [], named: [], alternatives: {},
      framesOnly: false,
    };
    const tokens = [];
    const [lines, framesOnly] = candidateLines(text);
    q.framesOnly = framesOnly;
    for (let line of lines) {
      line = line.replace(URL_RE, " ").replace(PATH_RE, " ");
      for (const word of line.match(WORD_RE) || []) {
        if (word.match(CJK_RUN)) {
          for (const part of word.split(CJK_RUN)) if (part) tokens.push(part);
          for (const run of word.match(CJK_RUN)) tokens.push(run);
        } else {
          tokens.push(word);
        }
      }
    }
    const latin = tokens.filter((t) => !CJK_FULL.test(t)).map((t) => t.toLowerCase());
    const short = latin.length <= SHORT_QUERY_WORDS && !text.trim().includes("\n");
    const keep = (w) => {
      const noise = /^\d+$/.test(w) || Array.from(w).length === 1;
      return !HEXLIKE.test(w) && (short || !noise);
    };
    let words = latin.filter(keep);
    q.short = short;
    // a typed question's words ("what does Xid 79 mean"), and a hang word beside a pod state
    // ("stuck in Pending"): llmdoctor/wiki/query.py _filler
    const podState = words.some((w) => POD_STATES.has(w));
    const filler = (w) => short && (TYPED_FILLER.has(w) || (podState && HANG_WORDS.has(w)));
    if (short) {
      q.phrase = words.filter((w) => !filler(w));
      const named = (text.toLowerCase().match(WORD_RE) || []);
      q.named = [named.join(" ")];
      if (named.some(filler)) {
        q.named = [
          named.filter((w) => !filler(w)).join(" "),
          named.filter((w) => !filler(w) && !STOPWORDS.has(w)).join(" "),
        ];
      }
    }
    const meaningful = words.filter((w) => !STOPWORDS.has(w) && !filler(w));
    if (meaningful.length) words = meaningful;
    else if (words.some(filler) && words.every((w) => STOPWORDS.has(w) || filler(w))) words = [];
    const seen = new Set();
    let budget = MAX_TERMS;
    for (const token of tokens) {
      if (budget <= 0) break;
      if (CJK_FULL.test(token)) {
        if (!q.cjkRuns.includes(token)) q.cjkRuns.push(token);
        for (const gram of runGrams(token)) {
          if (!seen.has(gram)) {
            seen.add(gram);
            q.grams.push(gram);
            budget -= 1;
          }
        }
      }
    }
    for (const word of words) {
      if (budget <= 0) break;
      if (!seen.has(word)) {
        seen.add(word);
        q.words.push(word);
        budget -= 1;
        if (short && Object.prototype.hasOwnProperty.call(SYMPTOMS, word)) {
          q.alternatives[word] = SYMPTOMS[word];
        }
      }
    }
    q.terms = q.words.concat(q.grams);
    return q;
  }

  function queryLines(text, limit = 2000) {
    const out = [];
    for (const line of text.split(/\r\n|\r|\n/)) {
      if (line.trim()) {
        out.push(line);
        if (out.length >= limit) break;
      }
    }
    return out;
  }

  // ---- signatures: a Pike VM over the programs of llmdoctor/wiki/site_regex.py ----------------

  const MAX_SIGNATURE_STEPS = 20000000;

  function isWordCode(c) {
    return (c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c === 95;
  }

  function inClass(ins, c) {
    if (typeof ins === "number") return ins === c;
    const r = ins[1];
    let found = false;
    for (let i = 0; i < r.length && !found; i += 2) found = c >= r[i] && c <= r[i + 1];
    return found !== ins[2];
  }

  // whether the program matches anywhere in `codes` (code points): every state is visited at
  // most once per position, so the cost is at most codes.length x program.length steps; and
  // `budget.steps` bounds a whole search (a huge paste against many signatures): once it is
  // spent, no further signature matches (the CLI still tells)
  function matchesProgram(prog, codes, budget = { steps: MAX_SIGNATURE_STEPS }) {
    const n = codes.length;
    const mark = new Int32Array(prog.length).fill(-1);
    function holds(kind, i) {
      if (kind === "^") return i === 0;
      if (kind === "$") return i === n;
      const before = i > 0 && isWordCode(codes[i - 1]);
      const after = i < n && isWordCode(codes[i]);
      return kind === "b" ? before !== after : before === after;
    }
    function add(list, start, i) {
      const stack = [start];
      while (stack.length) {
        const p = stack.pop();
        if (mark[p] === i) continue;
        if (--budget.steps < 0) return false;
        mark[p] = i;
        const ins = prog[p];
        const op = typeof ins === "number" ? "c" : ins[0];
        if (op === "m") return true;
        if (op === "j") stack.push(ins[1]);
        else if (op === "s") stack.push(ins[2], ins[1]);
        else if (op === "a") {
          if (holds(ins[1], i)) stack.push(p + 1);
        } else list.push(p);
      }
      return false;
    }
    let current = [];
    for (let i = 0; i <= n; i++) {
      if (add(current, 0, i)) return true;
      if (i === n) break;
      const next = [];
      for (const p of current) {
        if (inClass(prog[p], codes[i]) && add(next, p + 1, i + 1)) return true;
      }
      current = next;
    }
    return false;
  }

  // ---- ranking, as llmdoctor/wiki/search.py ranks ------------------------------------------

  function tokenize(term) {
    // what FTS5 makes of one quoted query term: its tokens, each folded and stemmed
    return (term.match(WORD_RE) || []).map(stem);
  }

  function makeIndex(data) {
    SYMPTOMS = data.symptoms || {};
    STOPWORDS = new Set(data.stopwords || []);
    TYPED_FILLER = new Set(data.typed_filler || []);
    POD_STATES = new Set(data.pod_states || []);
    HANG_WORDS = new Set(data.hang_words || []);
    const postings = data.postings; // stemmed term -> [doc, weighted freq, doc, freq, ...]
    const phrases = data.phrases || {}; // a symptom spelling of several words -> the same
    const docs = data.docs; // [id, title, severity, snippet]
    const N = docs.length;
    const avgdl = N ? data.total_tokens / N : 1;
    const sizes = data.sizes;
    function tfPart(f, d) {
      return (f * (K1 + 1)) / (f + K1 * (1 - B + (B * sizes[d]) / avgdl));
    }
    function hitsOf(flat) {
      // [doc, weighted freq, doc, freq, ...] -> Map doc -> freq
      const m = new Map();
      for (let i = 0; i < flat.length; i += 2) m.set(flat[i], flat[i + 1]);
      return m;
    }
    // a quoted query term is a phrase of its tokens; one token is the common case
    function termHits(term) {
      const toks = tokenize(term);
      if (toks.length === 0) return new Map();
      if (toks.length === 1) return hitsOf(postings[toks[0]] || []);
      // several tokens: a phrase. The symptom spellings' frequencies were counted at site time
      // with their words adjacent, as FTS5 counts them; any other is a near match (rows
      // holding every token: the index keeps no positions outside the naming columns)
      if (Object.prototype.hasOwnProperty.call(phrases, term)) return hitsOf(phrases[term]);
      let m = null;
      for (const t of toks) {
        const p = postings[t] || [];
        const next = new Map();
        for (let i = 0; i < p.length; i += 2) {
          if (m === null || m.has(p[i])) next.set(p[i], Math.min(p[i + 1], m ? m.get(p[i]) : Infinity));
        }
        m = next;
      }
      return m;
    }
    function idfFts(n) {
      const idf = Math.log((N - n + 0.5) / (n + 0.5));
      return idf > 0 ? idf : 1e-6;
    }
    function hasPhrase(seq, phrase) {
      if (!seq || !phrase.length || seq.length < phrase.length) return false;
      outer: for (let i = 0; i + phrase.length <= seq.length; i++) {
        for (let j = 0; j < phrase.length; j++) if (seq[i + j] !== phrase[j]) continue outer;
        return true;
      }
      return false;
    }
    // the query as typed, tokenized once: its words as one phrase, its Chinese runs as grams
    function naming(q) {
      return {
        phrase: [].concat(...q.phrase.map(tokenize)),
        runs: q.cjkRuns.map((run) => runGrams(run).map(stem)),
      };
    }
    function namingCount(named, d) {
      const heads = data.heads[d]; // token lists of name, title, aliases, tags, cjk_title
      let count = 0;
      if (named.phrase.length) {
        for (let c = 0; c < 4; c++) if (hasPhrase(heads[c], named.phrase)) count += 1;
      }
      if (named.runs.length && named.runs.every((grams) => hasPhrase(heads[4], grams))) {
        count += 1;
      }
      return count;
    }
    // One query term and the words the runbooks use for it (SYMPTOMS in query.py: "slow" is
    // searched as slow OR latency OR ttft OR throughput), as FTS5 sees `("slow" OR ...)`:
    // rows holding any spelling; bm25 adds each spelling's own IDF x frequency part.
    function termGroup(q, term) {
      const spellings = [term, ...(q.alternatives[term] || [])].map(termHits);
      const rows = new Set();
      for (const m of spellings) for (const d of m.keys()) rows.add(d);
      return { spellings, rows };
    }
    function groupBm25(group, d) {
      let sum = 0;
      for (const m of group.spellings) {
        const f = m.get(d);
        if (f !== undefined) sum += idfFts(m.size) * tfPart(f, d);
      }
      return sum;
    }
    function rankWordByWord(q, wanted) {
      const groups = q.terms.map((t) => termGroup(q, t));
      const holding = groups.map((g) => g.rows.size);
      const relevance = new Map();
      if (holding.reduce((a, b) => a + b, 0) <= MAX_WORD_BY_WORD_HITS) {
        groups.forEach((g, i) => {
          // search.py: each term's bm25 with FTS5's IDF replaced by log(1 + odds)
          const odds = (N - holding[i] + 0.5) / (holding[i] + 0.5);
          const scale = Math.log1p(odds) / idfFts(holding[i]);
          for (const d of g.rows) relevance.set(d, (relevance.get(d) || 0) + scale * groupBm25(g, d));
        });
      } else {
        for (const g of groups) {
          for (const d of g.rows) relevance.set(d, (relevance.get(d) || 0) + groupBm25(g, d));
        }
      }
      const named = naming(q);
      const cands = [];
      for (const [d, rel] of relevance) {
        const coversAll = groups.every((g) => g.rows.has(d));
        cands.push({ d, rel, coversAll, names: namingCount(named, d), sig: false });
      }
      cands.sort(
        (a, b) =>
          b.coversAll - a.coversAll || b.names - a.names || b.rel - a.rel || a.d - b.d
      );
      return cands.slice(0, wanted);
    }
    function rankAllWords(q, wanted) {
      const relevance = new Map();
      for (const m of q.terms.map(termHits)) {
        const idf = idfFts(m.size);
        for (const [d, f] of m) relevance.set(d, (relevance.get(d) || 0) + idf * tfPart(f, d));
      }
      const cands = [];
      for (const [d, rel] of relevance) cands.push({ d, rel, coversAll: false, names: 0, sig: false });
      cands.sort((a, b) => b.rel - a.rel || a.d - b.d);
      return cands.slice(0, wanted);
    }
    function signatureMatches(q, cands) {
      // a team's signature never runs in the browser's backtracking RegExp: the site compiled
      // each into a program for matchesProgram (linear time); one without a program is left
      // to `llmdoctor wiki search`
      const lines = queryLines(q.text);
      if (!lines.length) return;
      const lowered = q.text.toLowerCase();
      let codes = null;
      const budget = { steps: MAX_SIGNATURE_STEPS };
      for (const c of cands) {
        const programs = (data.programs || [])[c.d] || [];
        (data.signatures[c.d] || []).some((sig, k) => {
          const words = sig.replace(ESCAPE, " ").match(LITERAL_WORD) || [];
          if (words.length && !words.some((w) => lowered.includes(w.toLowerCase()))) return false;
          if (!programs[k]) return false;
          codes = codes || lines.map((l) => Array.from(l, (ch) => ch.codePointAt(0)));
          if (codes.some((l) => matchesProgram(programs[k], l, budget))) c.sig = true;
          return c.sig;
        });
      }
    }
    function search(raw, limit = 10) {
      const q = parseQuery(raw);
      if (!q.terms.length || limit <= 0) return { query: q, results: [] };
      const wanted = Math.max(limit * 2, MIN_CANDIDATES);
      const cands =
        q.short && q.terms.length <= MAX_WORD_BY_WORD_TERMS
          ? rankWordByWord(q, wanted)
          : rankAllWords(q, wanted);
      if (!cands.length) return { query: q, results: [] };
      signatureMatches(q, cands);
      if (q.framesOnly) {
        // a frame's words alone (`main`, `run`, `module`) name nothing: search.py _rank
        cands.splice(0, cands.length, ...cands.filter((c) => c.sig));
        if (!cands.length) return { query: q, results: [] };
      }
      const typed = q.short ? q.named : [];
      for (const c of cands) c.exact = typed.some((name) => data.names[c.d].includes(name));
      const tier = (c) =>
        (c.sig ? 1e6 : 0) + (c.coversAll ? 1e4 : 0) + (c.exact ? 1e2 : 0) + c.names;
      cands.sort((a, b) => (docs[a.d][0] < docs[b.d][0] ? -1 : docs[a.d][0] > docs[b.d][0] ? 1 : 0));
      cands.sort((a, b) => tier(b) - tier(a) || b.rel - a.rel);
      const levels = Array.from(new Set(cands.map(tier))).sort((a, b) => a - b);
      const step = Math.max(...cands.map((c) => c.rel)) + 1.0;
      const results = cands.slice(0, limit).map((c) => ({
        id: docs[c.d][0],
        title: docs[c.d][1],
        severity: docs[c.d][2],
        snippet: docs[c.d][3],
        score: Math.round((c.rel + levels.indexOf(tier(c)) * step) * 1000) / 1000,
        signature: c.sig,
      }));
      return { query: q, results };
    }
    return { search, stem, parseQuery };
  }
  window.llmdoctorMakeIndex = makeIndex; // for tools and benchmarks
  window.llmdoctorMatchesProgram = matchesProgram; // for the tests of site_regex

  // ---- the page ----------------------------------------------------------------------------

  function escapeHtml(s) {
    return String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
  }

  function highlight(text, query) {
    const wanted = new Set(query.words.map(stem));
    const grams = query.grams;
    let html = escapeHtml(text).replace(WORD_RE, (w) =>
      wanted.has(stem(w)) ? "<mark>" + w + "</mark>" : w
    );
    for (const g of grams) html = html.split(g).join("<mark>" + g + "</mark>");
    return html;
  }

  function render(outcome, list, status, ms) {
    const { query, results } = outcome;
    list.innerHTML = results
      .map(
        (r) =>
          `<li class="result" data-id="${escapeHtml(r.id)}"><a href="${encodeURIComponent(r.id)}.html">` +
          `<span class="rid">${escapeHtml(r.id)}</span> ${escapeHtml(r.title)}</a> ` +
          `<span class="sev sev-${escapeHtml(r.severity)}">${escapeHtml(r.severity)}</span>` +
          (r.signature ? ' <span class="sigmatch">matches a signature</span>' : "") +
          `<p>${highlight(r.snippet, query)}</p></li>`
      )
      .join("");
    if (status) {
      status.textContent = query.text.trim()
        ? `${results.length} result${results.length === 1 ? "" : "s"} (${ms.toFixed(1)} ms)`
        : "";
    }
    list.setAttribute("data-ms", ms.toFixed(3));
    list.setAttribute("data-query", query.text);
  }

  function start() {
    const data = window.LLMDOCTOR_INDEX;
    const input = document.getElementById("q");
    const list = document.getElementById("results");
    const status = document.getElementById("status");
    if (!data || !input || !list) return;
    const index = makeIndex(data);
    window.llmdoctorSearch = index;
    let timer = null;
    function run(updateUrl) {
      const t0 = performance.now();
      const outcome = index.search(input.value, 20);
      const ms = performance.now() - t0;
      render(outcome, list, status, ms);
      if (updateUrl && window.history && window.history.replaceState) {
        const url = new URL(window.location.href);
        if (input.value) url.searchParams.set("q", input.value);
        else url.searchParams.delete("q");
        try {
          window.history.replaceState(null, "", url.toString());
        } catch (e) {
          // file:// pages may refuse a changed URL; the results are shown all the same
        }
      }
    }
    input.addEventListener("input", () => {
      clearTimeout(timer);
      timer = setTimeout(() => run(true), 60);
    });
    const params = new URLSearchParams(window.location.search);
    if (params.has("q")) {
      input.value = params.get("q");
      run(false);
    }
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
