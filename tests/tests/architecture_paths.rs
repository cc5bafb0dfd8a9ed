//! The pages that say where things are keep up with the tree: every repository path
//! `ARCHITECTURE.md` names exists, and every relative link of it, of `BENCHMARKS.md` and of the
//! lab notes under `docs/benchmarks/` (and every link into those from the other pages) reaches a
//! file, and with a `#fragment` a heading of that file. Reads nothing outside the repository.
//!
//! What counts as a path: a code span, or a word of a fenced block, that contains a `/` and no
//! whitespace, is made of path characters only (ASCII letters and digits, `._-/`, `{a,b}`
//! alternatives, `<placeholder>` and `*` components), starts with neither `/` nor `$`, and ends
//! in `/`, has an extension on its last component, or starts with an entry of the repository's
//! root. So `store/src/ports.rs`, `workflow/src/steps/` and `.ci/run` are paths, and
//! `GET /orders/{id}`, `/readyz`, `${ChargePaymentActivityArn}`, `text/event-stream` and
//! `sagas/s` are not. `{a,b}` stands for both names; a component with `<…>` or `*` stands for
//! any name, so its folder must exist.

use std::collections::{BTreeSet, HashMap};
use std::path::{Component, Path, PathBuf};

/// The repository: the workspace this package is a member of.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the package is inside the workspace")
        .to_path_buf()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A page's prose (its fenced blocks blanked, so that line numbers stay) and the lines of its
/// fenced blocks.
struct Page {
    prose: String,
    fenced: Vec<String>,
}

fn split(text: &str) -> Page {
    let mut page = Page {
        prose: String::new(),
        fenced: Vec::new(),
    };
    let mut in_fence = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
        } else if in_fence {
            page.fenced.push(line.to_owned());
        } else {
            page.prose.push_str(line);
        }
        page.prose.push('\n');
    }
    page
}

/// The prose's code spans (from a run of backticks to the next run as long; a span may cross a
/// line break), and the prose with them taken out.
fn code_spans(prose: &str) -> (Vec<&str>, String) {
    let bytes = prose.as_bytes();
    let run_at = |i: usize| bytes[i..].iter().take_while(|b| **b == b'`').count();
    let (mut spans, mut rest) = (Vec::new(), String::new());
    let (mut i, mut copied) = (0, 0);
    while i < bytes.len() {
        if bytes[i] != b'`' {
            i += 1;
            continue;
        }
        let run = run_at(i);
        let start = i + run;
        let mut j = start;
        let mut end = None;
        while j < bytes.len() {
            if bytes[j] != b'`' {
                j += 1;
                continue;
            }
            let n = run_at(j);
            if n == run {
                end = Some(j);
                break;
            }
            j += n;
        }
        match end {
            Some(end) => {
                spans.push(prose[start..end].trim());
                rest.push_str(&prose[copied..i]);
                i = end + run;
                copied = i;
            }
            // A lone run of backticks is text.
            None => i = start,
        }
    }
    rest.push_str(&prose[copied..]);
    (spans, rest)
}

/// Whether `token` names a path of the repository (the rule in the module's doc).
fn names_a_path(token: &str, root_entries: &BTreeSet<String>) -> bool {
    let path_chars = |c: char| c.is_ascii_alphanumeric() || "._-/{},<>*".contains(c);
    if !token.contains('/') || token.starts_with(['/', '$']) || !token.chars().all(path_chars) {
        return false;
    }
    let first = token.split('/').next().unwrap_or_default();
    let last = token
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or_default();
    token.ends_with('/') || last.contains('.') || root_entries.contains(first)
}

/// `{a,b}` alternatives spelled out: `store/src/{sqlite,dynamodb}/` is two paths.
fn expand(token: &str) -> Vec<String> {
    let Some(open) = token.find('{') else {
        return vec![token.to_owned()];
    };
    let Some(close) = token[open..].find('}').map(|c| open + c) else {
        return vec![token.to_owned()];
    };
    token[open + 1..close]
        .split(',')
        .flat_map(|alt| expand(&format!("{}{alt}{}", &token[..open], &token[close + 1..])))
        .collect()
}

/// Whether `path` (relative, `/`-separated) exists under `root`: as a folder when it ends in
/// `/`; up to its first `<…>` or `*` component, which must be a folder's child. `..` leaves
/// the repository, so a path with one never exists.
fn exists(root: &Path, path: &str) -> bool {
    let mut at = root.to_path_buf();
    for part in path.split('/').filter(|p| !p.is_empty() && *p != ".") {
        if part == ".." {
            return false;
        }
        if part.contains(['<', '*']) {
            return at.is_dir();
        }
        at.push(part);
    }
    if path.ends_with('/') {
        at.is_dir()
    } else {
        at.exists()
    }
}

/// Every path `text` names, in its code spans and in the words of its fenced blocks, in the
/// order it names them, each once.
fn named_paths(text: &str, root_entries: &BTreeSet<String>) -> Vec<String> {
    let page = split(text);
    let (spans, _) = code_spans(&page.prose);
    let words = page.fenced.iter().flat_map(|line| {
        line.split_whitespace()
            .map(|w| w.trim_matches(|c: char| "()[],;:'\"".contains(c)))
    });
    let mut seen = BTreeSet::new();
    spans
        .into_iter()
        .chain(words)
        .filter(|t| names_a_path(t, root_entries))
        .flat_map(expand)
        .filter(|p| seen.insert(p.clone()))
        .collect()
}

/// A heading's anchor as GitHub makes it: lower case, spaces as `-`, every character but
/// letters, digits, `-` and `_` dropped.
fn slug(heading: &str) -> String {
    heading
        .chars()
        .flat_map(char::to_lowercase)
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a page's headings (a repeated one gets `-1`, `-2`, … as on GitHub).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut anchors = BTreeSet::new();
    for line in split(text).prose.lines() {
        let level = line.chars().take_while(|c| *c == '#').count();
        if !(1..=6).contains(&level) || !line[level..].starts_with(' ') {
            continue;
        }
        let anchor = slug(line[level..].trim().trim_end_matches('#').trim_end());
        let n = seen.entry(anchor.clone()).or_default();
        anchors.insert(match *n {
            0 => anchor,
            n => format!("{anchor}-{n}"),
        });
        *n += 1;
    }
    anchors
}

/// The targets of a page's inline links, `[text](target)`, outside code.
fn link_targets(text: &str) -> Vec<String> {
    let (_, prose) = code_spans(&split(text).prose);
    prose
        .match_indices("](")
        .filter_map(|(i, _)| {
            let rest = &prose[i + 2..];
            let target = rest[..rest.find(')')?].split_whitespace().next()?;
            Some(target.to_owned())
        })
        .collect()
}

/// `path` with its `.` and `..` components resolved, without asking the file system.
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            c => out.push(c),
        }
    }
    out
}

/// Where a relative link of `page` leads, or `None` for a URL.
fn link_destination(page: &Path, target: &str) -> Option<(PathBuf, Option<String>)> {
    if target.contains("://") || target.starts_with("mailto:") {
        return None;
    }
    let (file, fragment) = match target.split_once('#') {
        Some((file, fragment)) => (file, Some(fragment.to_owned())),
        None => (target, None),
    };
    let file = match file {
        "" => page.to_path_buf(),
        file => lexical(&page.parent().expect("a page is in a folder").join(file)),
    };
    Some((file, fragment))
}

/// What is wrong with a link of `page`, if anything.
fn broken_link(root: &Path, page: &Path, target: &str) -> Option<String> {
    let (file, fragment) = link_destination(page, target)?;
    let shown = page.strip_prefix(root).unwrap_or(page).display();
    if !file.starts_with(root) {
        return Some(format!("{shown}: ({target}) leads outside the repository"));
    }
    if !file.exists() {
        return Some(format!("{shown}: ({target}) names no file"));
    }
    let fragment = fragment.filter(|f| !f.is_empty())?;
    if file.extension().is_some_and(|e| e == "md") && !anchors(&read(&file)).contains(&fragment) {
        return Some(format!("{shown}: ({target}) names no heading of its page"));
    }
    None
}

/// `BENCHMARKS.md` and every page of `docs/benchmarks/`.
fn benchmark_pages(root: &Path) -> Vec<PathBuf> {
    let mut pages = vec![root.join("BENCHMARKS.md")];
    pages.extend(markdown_in(&root.join("docs/benchmarks"), false));
    pages
}

/// The `.md` files of `dir` (and of its folders, when `deep`), sorted.
fn markdown_in(dir: &Path, deep: bool) -> Vec<PathBuf> {
    let mut pages = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("a folder entry").path();
        if path.is_dir() {
            if deep {
                pages.extend(markdown_in(&path, true));
            }
        } else if path.extension().is_some_and(|e| e == "md") {
            pages.push(path);
        }
    }
    pages.sort();
    pages
}

fn root_entries(root: &Path) -> BTreeSet<String> {
    std::fs::read_dir(root)
        .expect("the repository's root")
        .map(|e| {
            e.expect("a root entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect()
}

#[test]
fn every_path_architecture_names_exists() {
    let root = root();
    let paths = named_paths(&read(&root.join("ARCHITECTURE.md")), &root_entries(&root));
    // The page names a hundred or so; a handful would mean the rule stopped seeing them.
    assert!(
        paths.len() > 50,
        "only {} paths found: {paths:?}",
        paths.len()
    );
    let missing: Vec<_> = paths.iter().filter(|p| !exists(&root, p)).collect();
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md names {} paths that do not exist: {missing:#?}",
        missing.len()
    );
}

#[test]
fn every_link_of_the_architecture_and_benchmark_pages_resolves() {
    let root = root();
    let mut pages = vec![root.join("ARCHITECTURE.md")];
    pages.extend(benchmark_pages(&root));
    let broken: Vec<_> = pages
        .iter()
        .flat_map(|page| {
            let root = &root;
            link_targets(&read(page))
                .into_iter()
                .filter_map(move |target| broken_link(root, page, &target))
        })
        .collect();
    assert!(broken.is_empty(), "broken links: {broken:#?}");
}

/// The short page is the way in: each page of lab notes is linked from it.
#[test]
fn every_page_of_docs_benchmarks_is_linked_from_benchmarks_md() {
    let root = root();
    let short = root.join("BENCHMARKS.md");
    let linked: BTreeSet<PathBuf> = link_targets(&read(&short))
        .iter()
        .filter_map(|t| link_destination(&short, t))
        .map(|(file, _)| file)
        .collect();
    let unlinked: Vec<_> = benchmark_pages(&root)
        .into_iter()
        .skip(1)
        .filter(|page| !linked.contains(page))
        .collect();
    assert!(!linked.is_empty());
    assert!(
        unlinked.is_empty(),
        "not linked from BENCHMARKS.md: {unlinked:#?}"
    );
}

/// The other pages (the root's and `docs/`'s) link to figures that moved: each such link must
/// still reach its page and its section.
#[test]
fn links_from_other_pages_into_the_benchmark_pages_resolve() {
    let root = root();
    let checked = benchmark_pages(&root);
    let (short, notes) = (root.join("BENCHMARKS.md"), root.join("docs/benchmarks"));
    let mut pages = markdown_in(&root, false);
    pages.extend(markdown_in(&root.join("docs"), true));
    pages.retain(|p| !checked.contains(p) && !p.ends_with("ARCHITECTURE.md"));
    let broken: Vec<_> = pages
        .iter()
        .flat_map(|page| {
            let (root, short, notes) = (&root, &short, &notes);
            link_targets(&read(page))
                .into_iter()
                .filter_map(move |target| {
                    let (file, _) = link_destination(page, &target)?;
                    (file == *short || file.starts_with(notes))
                        .then(|| broken_link(root, page, &target))
                        .flatten()
                })
        })
        .collect();
    assert!(broken.is_empty(), "broken links: {broken:#?}");
}

#[test]
fn the_path_rule_takes_repository_paths_and_leaves_routes_and_placeholders() {
    let entries: BTreeSet<String> = [".ci", "store"].map(str::to_owned).into();
    for path in [
        "store/src/ports.rs",
        "workflow/src/steps/",
        ".ci/run",
        "store/src/{sqlite,dynamodb}/",
        "workflow/src/steps/<step>.rs",
    ] {
        assert!(names_a_path(path, &entries), "{path}");
    }
    for other in [
        "GET /orders/{id}",
        "/readyz",
        "${ChargePaymentActivityArn}",
        "text/event-stream",
        "sagas/s",
        "application/problem+json",
        "https://docs.easypost.com/docs/shipments",
    ] {
        assert!(!names_a_path(other, &entries), "{other}");
    }
    assert_eq!(
        expand("store/src/contract/fake_{stripe,easypost}.rs"),
        [
            "store/src/contract/fake_stripe.rs",
            "store/src/contract/fake_easypost.rs"
        ]
    );
    assert_eq!(
        slug("100,000 parked again (`bench parked`, 2026-12-03)"),
        "100000-parked-again-bench-parked-2026-12-03"
    );
}
