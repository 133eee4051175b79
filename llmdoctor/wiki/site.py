"""The runbook wiki as a static site: one page per entry, an index with in-page search, tag pages.

The pages hold everything they need (one stylesheet, one script, the search index as a script):
no server, no external assets, relative links only, so the folder works opened from `file://` and
from any static host (GitLab/GitHub Pages, an S3 bucket, an nginx pod). Entries are untrusted
team input: markdown is rendered with raw HTML disabled and every other field is escaped.

    build_site(Path("site"), wiki_dirs=["team-runbooks/"], base_url="https://runbooks.example/")
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path

from llmdoctor.errors import BadInput
from llmdoctor.wiki.fix_params import fill
from llmdoctor.wiki.folders import within_folder

SECTIONS = (("symptom", "Symptom"), ("cause", "Cause"), ("fix", "Fix"), ("verify", "Verify"))
ASSETS = ("search.js", "style.css")
SITE_MARKER = ".llmdoctor-site"
_SLUG = re.compile(r"[^a-z0-9._-]+")
EXAMPLES_SHOWN = 3
EXAMPLE_LINES = 12
EXAMPLE_LINE_CHARS = 2000


@dataclass
class SiteSummary:
    """What `build_site` wrote."""

    path: Path
    entries: int
    tags: int
    base_url: str | None = None
    problems: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {
            "path": str(self.path),
            "entries": self.entries,
            "tags": self.tags,
            "base_url": self.base_url,
            "index": str(self.path / "index.html"),
            "problems": self.problems,
        }


def entry_url(base_url: str, entry_id: str) -> str:
    """The page address of an entry under a published site (`<base>/<id>.html`)."""
    return base_url.rstrip("/") + "/" + entry_id + ".html"


def tag_slug(tag: str) -> str:
    return _SLUG.sub("-", tag.strip().lower()).strip("-.") or "tag"


def unique_slugs(tags) -> dict[str, str]:
    """A file name for each tag, no two alike: tags that differ only in case or punctuation
    ('GPU', 'gpu', 'g p u') would otherwise overwrite each other's page."""
    slugs: dict[str, str] = {}
    taken: set[str] = set()
    for tag in sorted(set(tags), key=lambda t: (tag_slug(t), t)):
        base = slug = tag_slug(tag)
        n = 2
        while slug in taken:
            slug = f"{base}-{n}"
            n += 1
        taken.add(slug)
        slugs[tag] = slug
    return slugs


def build_site(
    out_dir: Path, wiki_dirs: list[str | Path] | None = None, base_url: str | None = None
):
    """Render the merged wiki (built-in, LLMDOCTOR_WIKI, then `wiki_dirs`) into `out_dir`.

    The site is built in a temporary folder beside `out_dir`, then moved into place: a new
    folder in one rename; an earlier site file by file, replacing only the files that site
    wrote (listed in its marker file) and leaving everything else there (a `.git`, a `CNAME`).
    Any other non-empty folder is refused, and so is a rebuild that would overwrite a file the
    earlier site did not write.
    """
    from llmdoctor.wiki.index import with_index
    from llmdoctor.wiki.library import load_library
    from llmdoctor.wiki.site_index import build_search_data, search_data_script

    out_dir = _target_folder(Path(out_dir))
    previous = _check_target(out_dir)
    library = load_library(wiki_dirs)
    problems = [str(e) for e in library.errors]
    entries = dict(library.entries)
    for reserved in RESERVED_IDS & set(entries):
        problems.append(
            f"{entries.pop(reserved).path}: the id {reserved!r} is the site's own page; "
            "its entry has no page (rename it)"
        )
    for entry_id, entry in list(entries.items()):
        why = unpublishable(entry)
        if why:
            problems.append(f"{entry.path}: {why}; its entry has no page")
            del entries[entry_id]
    search_data = with_index(wiki_dirs, lambda conn: build_search_data(conn, set(entries)))
    renderer = _Renderer(entries, library.overridden, base_url)
    parent = out_dir.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=".llmdoctor-site-", dir=parent))
    except OSError as exc:
        raise BadInput(f"-o {out_dir}: cannot write there ({exc.strerror or exc})") from None
    try:
        (work / "tags").mkdir()
        for name in ASSETS:
            (work / name).write_text(_asset(name), encoding="utf-8")
        (work / "search-index.js").write_text(search_data_script(search_data), encoding="utf-8")
        for entry in entries.values():
            page = renderer.entry_page(entry)
            (work / f"{entry.id}.html").write_text(page, encoding="utf-8")
        tags = renderer.tags()
        for tag, ids in tags.items():
            (work / "tags" / f"{renderer.slug(tag)}.html").write_text(
                renderer.tag_page(tag, ids), encoding="utf-8"
            )
        (work / "index.html").write_text(renderer.index_page(tags), encoding="utf-8")
        urls = {i: entry_url(base_url, i) if base_url else f"{i}.html" for i in sorted(entries)}
        (work / "urls.json").write_text(json.dumps(urls, indent=1) + "\n", encoding="utf-8")
        _replace(work, out_dir, previous)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return SiteSummary(out_dir, len(entries), len(tags), base_url, problems)


RESERVED_IDS = frozenset({"index"})  # index.html is the front page


def unpublishable(entry) -> str | None:
    """Why an entry cannot have a page (None: it can). Its id becomes a file name, so the lint
    rules hold here too: a valid id, equal to the file's name. (A file linked out of its wiki
    folder never becomes an entry: entry.refuse_linked_out.)"""
    from llmdoctor.wiki.lint import ID_PATTERN

    if not isinstance(entry.id, str) or not ID_PATTERN.match(entry.id):
        return f"the id {entry.id!r} is not lower-case letters and digits joined by '-'"
    path = Path(entry.path)
    if entry.id != path.stem:
        return f"the id {entry.id!r} does not match the file name {path.name!r}"
    return None


def _target_folder(out_dir: Path) -> Path:
    """-o as given; a link to a folder is followed (the link stays, the site goes where it
    points)."""
    return out_dir.resolve() if out_dir.is_symlink() and out_dir.is_dir() else out_dir


def _check_target(out_dir: Path) -> list[str] | None:
    """The files an earlier site wrote there (None: a new or empty folder); BadInput when the
    folder is not ours to write into."""
    if out_dir.exists() and not out_dir.is_dir():
        raise BadInput(f"-o {out_dir}: exists and is not a folder")
    if not out_dir.is_dir() or not any(out_dir.iterdir()):
        return None
    marker = out_dir / SITE_MARKER
    try:
        written = json.loads(marker.read_text(encoding="utf-8"))["files"]
    except (OSError, ValueError, KeyError, TypeError):
        written = None
    if not isinstance(written, list) or not all(isinstance(f, str) for f in written):
        raise BadInput(
            f"-o {out_dir}: the folder is not empty and was not written by `llmdoctor wiki site`; "
            "choose an empty or new folder (nothing was changed)"
        )
    for name in written:  # the marker is a file in the folder: whoever can write there wrote it
        if not _site_file_name(name):
            raise BadInput(
                f"-o {out_dir}: its {SITE_MARKER} lists {name!r}, not a file of a site; "
                "remove the marker or choose another folder (nothing was changed)"
            )
    return written


def _site_file_name(name: str) -> bool:
    """Whether a marker's entry can be a file the site wrote: a relative path below the folder."""
    parts = name.split("/")
    return (
        bool(name)
        and "\\" not in name
        and "\0" not in name
        and all(p not in ("", ".", "..") for p in parts)
    )


def _replace(work: Path, out_dir: Path, previous: list[str] | None) -> None:
    """Move the new site from `work` into `out_dir` (see build_site)."""
    new = sorted(str(p.relative_to(work)) for p in work.rglob("*") if p.is_file())
    marker = {"written_by": "llmdoctor wiki site", "files": new}
    (work / SITE_MARKER).write_text(json.dumps(marker, indent=1) + "\n", encoding="utf-8")
    os.chmod(work, 0o755)
    if previous is None and not out_dir.exists():
        os.replace(work, out_dir)
        return
    ours = set(previous or ())
    linked = [f for f in [*new, *ours] if not within_folder(out_dir / f, out_dir)]
    if linked:
        raise BadInput(
            f"-o {out_dir}: {linked[0]} is reached through a link out of the folder; "
            "remove the link first (nothing was changed)"
        )
    foreign = [f for f in new if f not in ours and os.path.lexists(out_dir / f)]
    if foreign:
        raise BadInput(
            f"-o {out_dir}: {foreign[0]} is there and was not written by `llmdoctor wiki site`; "
            "move it away first (nothing was changed)"
        )
    for name in new:
        (out_dir / name).parent.mkdir(parents=True, exist_ok=True)
        os.replace(work / name, out_dir / name)
    for name in sorted(ours - set(new)):  # pages of entries that are gone
        (out_dir / name).unlink(missing_ok=True)
    os.replace(work / SITE_MARKER, out_dir / SITE_MARKER)


def _image_as_link(token) -> None:
    """An image in an entry: a remote one becomes a link to it (the site loads nothing from
    elsewhere: a reader's address is nobody's business), any other its alt text."""
    src = str(token.attrs.get("src", ""))
    alt = _esc(token.content or src)
    token.type, token.tag, token.nesting, token.attrs, token.children = (
        "html_inline",
        "",
        0,
        {},
        None,
    )
    if src.startswith(("http://", "https://")):
        token.content = f'<a class="image" href="{_esc(src)}">{alt}</a>'
    else:
        token.content = alt


def _asset(name: str) -> str:
    return files("llmdoctor.wiki").joinpath("site_assets", name).read_text(encoding="utf-8")


def _esc(text: object) -> str:
    return html.escape(str(text), quote=True)


class _Renderer:
    """Pages for one wiki: entries by id, plus what links them (checks, explains)."""

    def __init__(self, entries: dict, overridden: dict, base_url: str | None):
        from markdown_it import MarkdownIt

        from llmdoctor.engine.registry import all_checks
        from llmdoctor.wiki.cause_graph import CauseGraph

        self.entries = entries
        self.overridden = overridden
        self.base_url = base_url
        self.md = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")
        self.md.core.ruler.push("llmdoctor_links", self._rewrite_links)
        self.explains = {
            cause: sorted(e for e in effects if e in entries)
            for cause, effects in CauseGraph.from_entries(entries).as_table().items()
        }
        self.explained_by: dict[str, list[str]] = {}
        for cause, effects in self.explains.items():
            for effect in effects:
                self.explained_by.setdefault(effect, []).append(cause)
        from llmdoctor.wiki.folders import builtin_dir_path

        self.builtin = os.path.realpath(builtin_dir_path())
        self.slugs = unique_slugs(t for e in entries.values() for t in e.tags)
        self.checks: dict[str, list[str]] = {}
        for spec in all_checks():
            for runbook in spec.runbooks:
                self.checks.setdefault(runbook, []).append(spec.id)

    def slug(self, tag: str) -> str:
        return self.slugs.get(tag) or tag_slug(tag)

    # -- shared pieces ------------------------------------------------------------------------

    def _page(self, title: str, body: str, depth: int = 0, canonical: str | None = None) -> str:
        up = "../" * depth
        link = f'<link rel="canonical" href="{_esc(canonical)}">' if canonical else ""
        return (
            '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{_esc(title)}</title>"
            '<link rel="icon" href="data:,">'
            f'<link rel="stylesheet" href="{up}style.css">{link}</head>\n<body>\n'
            f'<header><a class="home" href="{up}index.html">llmdoctor runbooks</a>'
            f'<form class="search" action="{up}index.html" method="get">'
            '<input name="q" type="search" placeholder="Search: OOM, 显存, a pasted error…" '
            'aria-label="Search the runbooks"></form></header>\n'
            f"<main>\n{body}\n</main>\n</body></html>\n"
        )

    def _entry_link(self, entry_id: str, up: str = "") -> str:
        entry = self.entries.get(entry_id)
        title = f' title="{_esc(entry.title)}"' if entry else ""
        return f'<a href="{up}{_esc(entry_id)}.html"{title}><code>{_esc(entry_id)}</code></a>'

    def _rewrite_links(self, state) -> None:
        """Links between entry files (`other-id.md`) point at their pages; other relative links
        (files in the team's repository) cannot resolve on the site and become plain text."""
        for block in state.tokens:
            dropping = False  # links do not nest: a dropped link_open pairs with the next close
            for token in block.children or ():
                if token.type == "image":
                    _image_as_link(token)
                    continue
                if token.type == "link_close":
                    if dropping:
                        token.type, token.tag, token.nesting, token.content = "text", "", 0, ""
                        dropping = False
                    continue
                if token.type != "link_open":
                    continue
                href = str(token.attrs.get("href", ""))
                if href.startswith(("http://", "https://", "mailto:", "#")):
                    continue
                path, _, anchor = href.partition("#")
                target = Path(path).name.removesuffix(".md")
                if path.endswith(".md") and target in self.entries:
                    token.attrs["href"] = f"{target}.html" + (f"#{anchor}" if anchor else "")
                    continue
                token.type, token.tag, token.nesting, token.attrs = "text", "", 0, {}
                token.content = ""
                dropping = True

    def _markdown(self, text: str) -> str:
        rendered = self.md.render(text or "")
        # `entry-id` in running text becomes a link when that entry exists
        return re.sub(
            r"<code>([a-z0-9][a-z0-9._-]*)</code>",
            lambda m: self._entry_link(m.group(1)) if m.group(1) in self.entries else m.group(0),
            rendered,
        )

    def _badge(self, severity: str) -> str:
        return f'<span class="sev sev-{_esc(severity)}">{_esc(severity)}</span>'

    def _tag_links(self, tags: list[str], up: str = "") -> str:
        return " ".join(
            f'<a class="tag" href="{up}tags/{_esc(self.slug(t))}.html">{_esc(t)}</a>' for t in tags
        )

    # -- pages --------------------------------------------------------------------------------

    def entry_page(self, entry) -> str:
        parts = [
            f'<article class="entry" id="entry-{_esc(entry.id)}">',
            f"<h1>{_esc(entry.title)}</h1>",
            f'<p class="meta"><code class="id">{_esc(entry.id)}</code> '
            f"{self._badge(entry.severity)} {self._tag_links(entry.tags)}</p>",
        ]
        if entry.aliases:
            aliases = ", ".join(f"<span>{_esc(a)}</span>" for a in entry.aliases)
            parts.append(f'<p class="aliases">Also known as: {aliases}</p>')
        for key, heading in SECTIONS:
            text = getattr(entry, key, "")
            if key == "fix":  # `{max_model_len}` reads as what it stands for
                text = fill(text)
            if text:
                parts.append(
                    f'<section id="{key}"><h2>{heading}</h2>{self._markdown(text)}</section>'
                )
        parts.append(self._signatures(entry))
        parts.append(self._relations(entry))
        if entry.references:
            parts.append(
                '<section id="references"><h2>References</h2>'
                f"{self._markdown(entry.references)}</section>"
            )
        parts.append(self._source(entry))
        parts.append("</article>")
        canonical = entry_url(self.base_url, entry.id) if self.base_url else None
        return self._page(f"{entry.title} — llmdoctor runbooks", "\n".join(parts), 0, canonical)

    def _signatures(self, entry) -> str:
        hints = ""
        if entry.hints:
            items = "".join(f"<li><code>{_esc(s)}</code></li>" for s in entry.hints)
            hints = (
                "<p>Hints: lines that point at this entry without proving it (weak evidence: "
                "at most a warning).</p>"
                f'<ul class="signatures hints">{items}</ul>'
            )
        if not entry.signatures and not hints:
            return (
                '<section id="signatures"><h2>Log lines that trigger it</h2>'
                "<p>No signature: this entry is found by search and by the checks below.</p>"
                "</section>"
            )
        items = "".join(f"<li><code>{_esc(s)}</code></li>" for s in entry.signatures)
        listed = f'<ul class="signatures">{items}</ul>' if items else ""
        examples = self._examples(entry)
        return (
            '<section id="signatures"><h2>Log lines that trigger it</h2>'
            "<p>Each is a regular expression matched against one log line at a time "
            "(<code>llmdoctor explain</code>, <code>llmdoctor diagnose</code>).</p>"
            f"{listed}{hints}{examples}</section>"
        )

    def _examples(self, entry) -> str:
        """The first lines of the entry's first example files, redacted as bundles are; a file
        (or the folder) linked to outside the wiki folder is not read."""
        from llmdoctor.redact import redact_text

        folder = Path(entry.path).with_name(f"{entry.id}.examples") if entry.path else None
        wiki = Path(entry.path).parent if entry.path else None
        if folder is None or not folder.is_dir() or not within_folder(folder, wiki):
            return ""
        shown = []
        for path in sorted(folder.iterdir())[:EXAMPLES_SHOWN]:
            if not path.is_file() or not within_folder(path, wiki):
                continue
            try:
                with path.open(encoding="utf-8", errors="replace") as fh:
                    head = fh.read(EXAMPLE_LINES * (EXAMPLE_LINE_CHARS + 1))
            except OSError:
                continue
            lines = head.splitlines()[:EXAMPLE_LINES]
            text = redact_text("\n".join(line[:EXAMPLE_LINE_CHARS] for line in lines).rstrip())
            shown.append(
                f"<figure><figcaption>{_esc(path.name)}</figcaption>"
                f"<pre>{_esc(text)}</pre></figure>"
            )
        return "<h3>Real examples</h3>" + "".join(shown) if shown else ""

    def _relations(self, entry) -> str:
        rows = []
        checks = sorted(set(self.checks.get(entry.id, [])) | set(entry.detected_by))
        if checks:
            rows.append(
                "<dt>Detected by checks</dt><dd>"
                + ", ".join(f"<code>{_esc(c)}</code>" for c in checks)
                + "</dd>"
            )
        if self.explains.get(entry.id):
            rows.append(
                "<dt>Explains (a consequence ranks below it)</dt><dd>"
                + ", ".join(self._entry_link(e) for e in self.explains[entry.id])
                + "</dd>"
            )
        if self.explained_by.get(entry.id):
            rows.append(
                "<dt>Explained by (look for these first)</dt><dd>"
                + ", ".join(self._entry_link(e) for e in sorted(self.explained_by[entry.id]))
                + "</dd>"
            )
        if not rows:
            return ""
        return f'<section id="related"><h2>Related</h2><dl>{"".join(rows)}</dl></section>'

    def _source(self, entry) -> str:
        path = Path(entry.path)
        builtin = os.path.dirname(os.path.realpath(path)) == self.builtin
        where = f"runbooks/{path.name} (built into llmdoctor)" if builtin else str(path)
        note = ""
        if self.overridden.get(entry.id):
            others = ", ".join(f"<code>{_esc(p)}</code>" for p in self.overridden[entry.id])
            note = f" It overrides {others}."
        return (
            f'<footer class="source">Source: <code>{_esc(where)}</code>.{note} '
            f"Edit the markdown file, then run <code>llmdoctor wiki lint</code>.</footer>"
        )

    def tags(self) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        for entry in self.entries.values():
            for tag in entry.tags:
                found.setdefault(tag, []).append(entry.id)
        return {t: sorted(ids) for t, ids in sorted(found.items(), key=lambda kv: kv[0].lower())}

    def _table(self, ids: list[str], up: str = "") -> str:
        rows = []
        for entry_id in ids:
            e = self.entries[entry_id]
            rows.append(
                f'<tr><td><a href="{up}{_esc(e.id)}.html"><code>{_esc(e.id)}</code></a></td>'
                f"<td>{_esc(e.title)}</td><td>{self._badge(e.severity)}</td>"
                f"<td>{self._tag_links(e.tags, up)}</td></tr>"
            )
        return (
            '<table class="entries"><thead><tr><th>Entry</th><th>Title</th><th>Severity</th>'
            f"<th>Tags</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
        )

    def tag_page(self, tag: str, ids: list[str]) -> str:
        body = (
            f"<h1>Tag: {_esc(tag)}</h1><p>{len(ids)} entr{'y' if len(ids) == 1 else 'ies'}.</p>"
            + self._table(ids, "../")
        )
        return self._page(f"{tag} — llmdoctor runbooks", body, depth=1)

    def index_page(self, tags: dict[str, list[str]]) -> str:
        order = {"critical": 0, "warning": 1, "info": 2}
        ids = sorted(self.entries, key=lambda i: (order.get(self.entries[i].severity, 3), i))
        tag_cloud = " ".join(
            f'<a class="tag" href="tags/{_esc(self.slug(t))}.html">{_esc(t)} '
            f"<small>{len(v)}</small></a>"
            for t, v in tags.items()
        )
        body = (
            "<h1>Runbooks</h1>"
            '<form class="big-search" onsubmit="return false">'
            '<input id="q" type="search" autocomplete="off" autofocus '
            'placeholder="Type a symptom or paste an error line: OOM, 显存, xid 79, '
            'CUDA out of memory…" aria-label="Search the runbooks"></form>'
            '<p id="status" aria-live="polite"></p><ol id="results"></ol>'
            f'<h2>Tags</h2><p class="tags">{tag_cloud}</p>'
            f"<h2>All entries ({len(ids)})</h2>{self._table(ids)}"
            '<script src="search-index.js"></script><script src="search.js"></script>'
        )
        return self._page("llmdoctor runbooks", body)
