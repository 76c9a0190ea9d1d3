//! The documentation leads somewhere, checked by reading the repository's files:
//!
//! 1. **Every relative link resolves.** In every Markdown file of the repository (outside
//!    `target/`, `node_modules/` and hidden folders), every relative link (`[text](path)`,
//!    `![alt](path)`, `[label]: path`, `href="path"`, `src="path"`) names a file or folder that
//!    exists inside the repository, and a `#fragment` into a Markdown file (or the file itself)
//!    names one of its headings, by GitHub's rules for heading anchors. Links in code blocks and
//!    code spans are not links, and are not checked.
//! 2. **Every command the documentation shows exists.** Every `capability <subcommand> ...` (and
//!    `cargo run -p capability-cli -- <subcommand>`) in a `sh`, `text` or `json` code block or in
//!    a code span of any Markdown file names a subcommand the command has, and a nested one
//!    (`capability audit verify`) one that subcommand has. The root crate cannot run the binary
//!    (`CARGO_BIN_EXE_capability` exists only in `capability-cli`'s own tests), so the
//!    subcommands are read from the source of `capability-cli`: the `#[derive(Parser)]` struct
//!    of `main.rs`, the `#[derive(Subcommand)]` enums its `#[command(subcommand)]` fields and
//!    variants lead to, and the `#[command(subcommand)]` fields of the `#[derive(Args)]`
//!    structs its variants hold (`capability grant revoke`).
//! 3. **Every ADR the code cites is written down.** Every `ADR-105` / `ADR 020` in a `.rs`,
//!    `.md` or `.toml` file has its record `docs/adr/<number>-*.md`, linked from
//!    `docs/adr/README.md`, and every numbered decision cited (`ADR-105 D2`,
//!    `adr-105-d2/...`) is a heading `D2. ...` of that record.
//! 4. **Every test the documentation names exists.** A code span `<package>: <path>` (as
//!    `tests/README.md` and `docs/threat-model.md` name the test that proves a guarantee:
//!    `capability-gate: write_gate::files_round_trip_and_bad_files_are_refused`) names a package
//!    of the workspace, and in its sources every module of the path (a file or folder of that
//!    name, or a `tests` module) and the function last, in a file of its innermost module; a
//!    path of one word is a module, a test target or a function; `name*` is a prefix.
//! 5. **Every Rust block is a doctest or says why not.** A ```` ```rust ```` block marked
//!    `ignore` (the chapters are the crates' documentation, so the others compile as doctests)
//!    opens with a line `// Not a doctest: <why>` that names where the whole thing is built.
//!
//! Each failure names the file and line of every offender. The scanning is plain text with the
//! standard library; the tests in `mod scanner` at the end check the scanner itself.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;
use std::path::{Component, Path, PathBuf};

/// The repository: the root crate's folder.
fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Folders never searched: build output, installed packages, and hidden folders (`.git`,
/// `.venv`, `.ci`).
fn skipped(name: &str) -> bool {
    name == "target" || name == "node_modules" || name == "__pycache__" || name.starts_with('.')
}

#[test]
fn every_relative_link_in_the_markdown_files_resolves() {
    let root = root();
    let mut anchors = Anchors::default();
    let mut problems = Vec::new();
    let mut checked = 0;
    for path in files_with_extension(&root, &["md"]) {
        let doc = Markdown::read(&root, &path);
        for link in doc.links() {
            checked += 1;
            if let Err(why) = check_link(&root, &doc.path, &link.dest, &mut anchors) {
                problems.push(format!("{}:{}: `{}`: {why}", doc.rel, link.line, link.dest));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "{} of {checked} links are broken:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn every_capability_command_the_documentation_shows_is_one_the_cli_has() {
    let root = root();
    let cli = Subcommands::of_cli(&root.join("capability-cli/src"));
    for expected in ["inspect", "gateway", "proxy", "audit", "db", "grant"] {
        assert!(
            cli.children.contains_key(expected),
            "the scanner did not find `capability {expected}` in capability-cli/src: {:?}",
            cli.children.keys().collect::<Vec<_>>()
        );
    }
    let mut problems = Vec::new();
    let mut checked = 0;
    for path in files_with_extension(&root, &["md"]) {
        let doc = Markdown::read(&root, &path);
        for shown in doc.commands() {
            checked += 1;
            if let Err(why) = cli.check(&shown.words) {
                problems.push(format!(
                    "{}:{}: `{}`: {why}",
                    doc.rel,
                    shown.line,
                    shown.text()
                ));
            }
        }
    }
    assert!(
        checked > 0,
        "no `capability <subcommand>` found in the documentation"
    );
    assert!(
        problems.is_empty(),
        "{} of {checked} commands shown are not the command's:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn every_adr_and_decision_the_code_cites_is_written_down() {
    let root = root();
    let adr_dir = root.join("docs/adr");
    let index = fs::read_to_string(adr_dir.join("README.md")).unwrap_or_default();
    let mut problems = Vec::new();
    let mut records: HashMap<String, Option<(String, BTreeSet<String>)>> = HashMap::new();
    let mut checked = 0;
    for path in files_with_extension(&root, &["rs", "md", "toml"]) {
        let rel = relative(&root, &path);
        let text = read(&path);
        for cite in adr_citations(&text) {
            checked += 1;
            let record = records
                .entry(cite.number.clone())
                .or_insert_with(|| adr_record(&adr_dir, &cite.number));
            let Some((file, decisions)) = record else {
                problems.push(format!(
                    "{rel}:{}: ADR {} has no record docs/adr/{}-*.md",
                    cite.line, cite.number, cite.number
                ));
                continue;
            };
            if let Some(decision) = &cite.decision
                && !decisions.contains(decision)
            {
                problems.push(format!(
                    "{rel}:{}: ADR {} {decision}: docs/adr/{file} has no heading `{decision}. ...` \
                     (it has {decisions:?})",
                    cite.line, cite.number
                ));
            }
        }
    }
    for file in fs::read_dir(&adr_dir).into_iter().flatten().flatten() {
        let name = file.file_name().to_string_lossy().into_owned();
        if !name.ends_with(".md") {
            continue;
        }
        if name != "README.md" && !index.contains(&format!("({name}")) {
            problems.push(format!("docs/adr/README.md: does not link to {name}"));
        }
        // The tests a record names as its proof (`capability-core/tests/it/policy.rs::deny_beats_allow...`).
        let doc = Markdown::read(&root, &file.path());
        for (line, path, test) in doc.named_functions() {
            checked += 1;
            let source = fs::read_to_string(root.join(&path)).unwrap_or_default();
            if source.is_empty() {
                problems.push(format!(
                    "{}:{line}: `{path}::{test}`: no such file",
                    doc.rel
                ));
            } else if !source.contains(&format!("fn {test}(")) {
                problems.push(format!(
                    "{}:{line}: `{path}::{test}`: {path} has no `fn {test}`",
                    doc.rel
                ));
            }
        }
    }
    assert!(checked > 0, "no ADR citation found: is the scanner broken?");
    assert!(
        problems.is_empty(),
        "{} problems with ADR citations:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn every_test_the_documentation_names_exists() {
    let root = root();
    let metadata = capability_testkit::workspace::metadata();
    let mut packages: BTreeMap<String, PathBuf> = BTreeMap::new();
    for package in metadata["packages"].as_array().into_iter().flatten() {
        let (Some(name), Some(manifest)) =
            (package["name"].as_str(), package["manifest_path"].as_str())
        else {
            continue;
        };
        if let Some(dir) = Path::new(manifest).parent() {
            packages.insert(name.to_owned(), dir.to_path_buf());
        }
    }
    let mut sources: HashMap<String, Vec<(PathBuf, String)>> = HashMap::new();
    let mut checked = 0;
    let mut problems = Vec::new();
    for file in files_with_extension(&root, &["md"]) {
        let doc = Markdown::read(&root, &file);
        for (line, package, path) in doc.named_tests() {
            // `alg: none` is a JSON member, not a test.
            let Some(dir) = packages.get(&package) else {
                continue;
            };
            checked += 1;
            let others: Vec<&PathBuf> = packages.values().filter(|d| *d != dir).collect();
            let files = sources
                .entry(package.clone())
                .or_insert_with(|| package_sources(dir, &others));
            if let Err(why) = names_a_test(files, &path) {
                problems.push(format!("{}:{line}: `{package}: {path}`: {why}", doc.rel));
            }
        }
    }
    assert!(
        checked > 200,
        "{checked} named tests found: is the scanner broken?"
    );
    assert!(
        problems.is_empty(),
        "{} tests named in the documentation that do not exist:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn every_ignored_rust_block_says_why_it_is_no_doctest() {
    let root = root();
    let mut ignored = 0;
    let mut problems = Vec::new();
    for file in files_with_extension(&root, &["md"]) {
        let text = read(&file);
        let lines: Vec<&str> = text.lines().collect();
        for (index, line) in lines.iter().enumerate() {
            if !unexplained_ignore(line, lines.get(index + 1).copied()) {
                continue;
            }
            problems.push(format!("{}:{}", relative(&root, &file), index + 1));
        }
        ignored += lines.iter().filter(|line| ignored_rust_fence(line)).count();
    }
    assert!(ignored >= 5, "{ignored} ignored Rust blocks found");
    assert!(
        problems.is_empty(),
        "Rust blocks marked `ignore` without a first line `// Not a doctest: <why>` (make them \
         doctests, or say why not and where the whole is built):\n{}",
        problems.join("\n")
    );
}

/// A fence that opens a Rust block marked `ignore`.
fn ignored_rust_fence(line: &str) -> bool {
    let Some(info) = line.trim_start().strip_prefix("```") else {
        return false;
    };
    let mut words = info.split([',', ' ']).filter(|w| !w.is_empty());
    words.next() == Some("rust") && words.any(|w| w == "ignore")
}

/// Whether `line` opens an ignored Rust block whose first line (`next`) does not say why.
fn unexplained_ignore(line: &str, next: Option<&str>) -> bool {
    ignored_rust_fence(line)
        && !next.is_some_and(|next| next.trim_start().starts_with("// Not a doctest: "))
}

/// Every `.rs` file of the package in `dir` (its own: not those of the packages in `others`,
/// which the root's folder holds), with its text.
fn package_sources(dir: &Path, others: &[&PathBuf]) -> Vec<(PathBuf, String)> {
    files_with_extension(dir, &["rs"])
        .into_iter()
        .filter(|file| {
            !others
                .iter()
                .any(|other| other.starts_with(dir) && file.starts_with(other))
        })
        .map(|file| {
            let text = read(&file);
            (file, text)
        })
        .collect()
}

/// Whether `path` (`module::...::function`) names a test in `files` (see the module's point 4).
fn names_a_test(files: &[(PathBuf, String)], path: &str) -> Result<(), String> {
    let is_module = |file: &Path, name: &str| {
        file.file_stem().is_some_and(|s| s == name)
            || file
                .parent()
                .and_then(Path::file_name)
                .is_some_and(|s| s == name)
    };
    let defines = |text: &str, name: &str| text.contains(&format!("fn {name}("));
    let segments: Vec<&str> = path.split("::").collect();
    let Some((last, modules)) = segments.split_last() else {
        return Err("an empty path".to_owned());
    };
    for module in modules {
        if *module != "tests" && !files.iter().any(|(file, _)| is_module(file, module)) {
            return Err(format!(
                "no module `{module}` (a file or folder of that name)"
            ));
        }
    }
    if let Some(prefix) = last.strip_suffix('*') {
        let starts = |text: &str| prefix.is_empty() || text.contains(&format!("fn {prefix}"));
        return if files.iter().any(|(_, text)| starts(text)) {
            Ok(())
        } else {
            Err(format!("no function starting `{prefix}`"))
        };
    }
    let Some(module) = modules.iter().rev().find(|m| **m != "tests") else {
        // One word: a module (a file or folder), a test target (a file), or a function.
        return if files
            .iter()
            .any(|(file, text)| is_module(file, last) || defines(text, last))
        {
            Ok(())
        } else {
            Err(format!("no module, test target or function `{last}`"))
        };
    };
    if files
        .iter()
        .any(|(file, text)| is_module(file, module) && defines(text, last))
    {
        Ok(())
    } else {
        Err(format!("no `fn {last}` in a file of module `{module}`"))
    }
}

// ----- files -----

/// Every file under `root` whose extension is one of `extensions`, sorted, outside the
/// [`skipped`] folders.
fn files_with_extension(root: &Path, extensions: &[&str]) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut folders = vec![root.to_path_buf()];
    while let Some(folder) = folders.pop() {
        let Ok(entries) = fs::read_dir(&folder) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                if !skipped(&name) {
                    folders.push(path);
                }
            } else if path
                .extension()
                .is_some_and(|e| extensions.iter().any(|x| e == *x))
            {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

fn read(path: &Path) -> String {
    match fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) => panic!("cannot read {}: {error}", path.display()),
    }
}

fn relative(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .to_string_lossy()
        .into_owned()
}

/// `path` with `.` and `..` taken out, without asking the file system; `None` when a `..` would
/// climb above the first component.
fn normalize(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            other => out.push(other),
        }
    }
    Some(out)
}

/// `%20` and the like decoded; a `%` not followed by two hex digits is kept.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let (Some(high), Some(low)) = (hex(bytes[i + 1]), hex(bytes[i + 2]))
        {
            out.push((high * 16 + low) as u8);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

// ----- Markdown -----

/// One Markdown file, split as a renderer reads it: fenced code blocks, and paragraphs (runs of
/// lines that are neither blank nor in a fence).
struct Markdown {
    path: PathBuf,
    rel: String,
    fences: Vec<Block>,
    paragraphs: Vec<Block>,
}

/// Lines of a file joined by `\n`, with the number of the first.
struct Block {
    /// The fence's language (the first word of its info string); empty for a paragraph.
    lang: String,
    first_line: usize,
    text: String,
}

impl Block {
    /// The line of the byte at `offset` of the block's text.
    fn line_of(&self, offset: usize) -> usize {
        self.first_line + self.text[..offset].matches('\n').count()
    }
}

/// A link as written: where, and its destination.
#[derive(Debug, PartialEq)]
struct Link {
    line: usize,
    dest: String,
}

/// A `capability ...` command as shown: where, and its words after `capability`.
#[derive(Debug, PartialEq)]
struct Shown {
    line: usize,
    words: Vec<String>,
}

impl Shown {
    fn text(&self) -> String {
        let mut text = String::from("capability");
        for word in self.words.iter().take(3) {
            text.push(' ');
            text.push_str(word);
        }
        text
    }
}

impl Markdown {
    fn read(root: &Path, path: &Path) -> Markdown {
        let (fences, paragraphs) = split_blocks(&read(path));
        Markdown {
            path: path.to_path_buf(),
            rel: relative(root, path),
            fences,
            paragraphs,
        }
    }

    /// Every link of the file, code blocks and code spans left out.
    fn links(&self) -> Vec<Link> {
        let mut links = Vec::new();
        for paragraph in &self.paragraphs {
            let (masked, _) = mask_code_spans(&paragraph.text);
            for (offset, dest) in link_destinations(&masked) {
                links.push(Link {
                    line: paragraph.line_of(offset),
                    dest,
                });
            }
        }
        links
    }

    /// Every `capability <subcommand>` shown: in `sh`, `text` and `json` blocks (and `bash`,
    /// `shell`, `console`), and in code spans.
    fn commands(&self) -> Vec<Shown> {
        let mut shown = Vec::new();
        for fence in &self.fences {
            match fence.lang.as_str() {
                "sh" | "bash" | "shell" | "console" | "text" => {
                    for (offset, words) in invocations(&fence.text) {
                        shown.push(Shown {
                            line: fence.line_of(offset),
                            words,
                        });
                    }
                }
                "json" => {
                    for (offset, words) in json_invocations(&fence.text) {
                        shown.push(Shown {
                            line: fence.line_of(offset),
                            words,
                        });
                    }
                }
                _ => {}
            }
        }
        for paragraph in &self.paragraphs {
            let (_, spans) = mask_code_spans(&paragraph.text);
            for (start, content) in spans {
                // A span that is a command, not prose that names the crate (`` `PromQuery` has
                // no capability manifest ``).
                let command = content.trim().trim_start_matches("$ ");
                if !command.starts_with("capability") && !command.starts_with("cargo ") {
                    continue;
                }
                for (_, words) in invocations(command) {
                    shown.push(Shown {
                        line: paragraph.line_of(start),
                        words,
                    });
                }
            }
        }
        shown.sort_by_key(|s| s.line);
        shown
    }

    /// Every code span `split` cuts in two, by line: where, and the two parts.
    fn split_spans(
        &self,
        split: impl Fn(&str) -> Option<(String, String)>,
    ) -> Vec<(usize, String, String)> {
        let mut found = Vec::new();
        for paragraph in &self.paragraphs {
            let (_, spans) = mask_code_spans(&paragraph.text);
            for (start, content) in spans {
                if let Some((first, second)) = split(content.trim()) {
                    found.push((paragraph.line_of(start), first, second));
                }
            }
        }
        found
    }

    /// Every `path.rs::function` written in a code span, by line: the tests a record names.
    fn named_functions(&self) -> Vec<(usize, String, String)> {
        self.split_spans(|span| {
            let (path, function) = span.split_once(".rs::")?;
            let plain = |c: char| c.is_ascii_alphanumeric() || c == '_';
            (!function.is_empty() && function.chars().all(plain) && !path.contains(' '))
                .then(|| (format!("{path}.rs"), function.to_owned()))
        })
    }

    /// Every test named as `<package>: <path>` in a code span: where, the package, the path.
    fn named_tests(&self) -> Vec<(usize, String, String)> {
        self.split_spans(|span| {
            let (package, path) = span.split_once(": ")?;
            let in_package = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-';
            let in_path = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | ':' | '*');
            (!package.is_empty()
                && package.chars().all(in_package)
                && !path.is_empty()
                && path.chars().all(in_path))
            .then(|| (package.to_owned(), path.to_owned()))
        })
    }

    /// The anchors GitHub gives the file's headings (`#two-commands`, a repeated heading's
    /// `-1`, `-2`), and the `id="..."` / `name="..."` of its HTML.
    fn anchors(&self) -> BTreeSet<String> {
        let mut seen: HashMap<String, usize> = HashMap::new();
        let mut anchors = BTreeSet::new();
        for paragraph in &self.paragraphs {
            for heading in headings(&paragraph.text) {
                let slug = slug(&heading);
                let count = seen.entry(slug.clone()).or_insert(0);
                let anchor = match *count {
                    0 => slug.clone(),
                    n => format!("{slug}-{n}"),
                };
                *count += 1;
                anchors.insert(anchor);
            }
            let (masked, _) = mask_code_spans(&paragraph.text);
            for attribute in ["id=\"", "name=\""] {
                for (_, value) in attribute_values(&masked, attribute) {
                    anchors.insert(value);
                }
            }
        }
        anchors
    }
}

/// The file's fenced code blocks and its paragraphs. A fence opens with three or more
/// backticks or tildes (indented or not, as in a list) and closes with at least as many of the
/// same; one never closed runs to the end of the file.
fn split_blocks(text: &str) -> (Vec<Block>, Vec<Block>) {
    let mut fences = Vec::new();
    let mut paragraphs = Vec::new();
    let mut fence: Option<(char, usize, Block)> = None;
    let mut paragraph: Option<Block> = None;
    for (index, line) in text.lines().enumerate() {
        let number = index + 1;
        let trimmed = line.trim_start();
        if let Some((mark, length, block)) = &mut fence {
            let run = trimmed.chars().take_while(|c| c == mark).count();
            if run >= *length && trimmed[run * mark.len_utf8()..].trim().is_empty() {
                let (_, _, block) = fence.take().expect("in a fence");
                fences.push(block);
            } else {
                if block.first_line == 0 {
                    block.first_line = number;
                } else {
                    block.text.push('\n');
                }
                block.text.push_str(line);
            }
            continue;
        }
        let mark = trimmed.chars().next().filter(|c| *c == '`' || *c == '~');
        let run = mark.map_or(0, |m| trimmed.chars().take_while(|c| *c == m).count());
        if let Some(mark) = mark
            && run >= 3
            && !(mark == '`' && trimmed[run..].contains('`'))
        {
            paragraphs.extend(paragraph.take());
            let lang = trimmed[run..]
                .trim()
                .split(|c: char| c.is_whitespace() || c == ',' || c == '{')
                .next()
                .unwrap_or("")
                .to_owned();
            let block = Block {
                lang,
                first_line: 0,
                text: String::new(),
            };
            fence = Some((mark, run, block));
            continue;
        }
        if trimmed.is_empty() {
            paragraphs.extend(paragraph.take());
            continue;
        }
        match &mut paragraph {
            Some(block) => {
                block.text.push('\n');
                block.text.push_str(line);
            }
            None => {
                paragraph = Some(Block {
                    lang: String::new(),
                    first_line: number,
                    text: line.to_owned(),
                })
            }
        }
    }
    paragraphs.extend(paragraph);
    fences.extend(fence.map(|(_, _, block)| block));
    (fences, paragraphs)
}

/// The text with every code span blanked (its bytes spaces, its line breaks kept), and each
/// span's offset and content. A run of N backticks opens a span that the next run of exactly
/// N closes; a run never closed is literal, and so is an escaped backtick.
fn mask_code_spans(text: &str) -> (String, Vec<(usize, String)>) {
    let bytes = text.as_bytes();
    let mut masked = bytes.to_vec();
    let mut spans = Vec::new();
    let run_at = |at: usize| bytes[at..].iter().take_while(|b| **b == b'`').count();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' {
            i += 2;
            continue;
        }
        if bytes[i] != b'`' {
            i += 1;
            continue;
        }
        let open = run_at(i);
        let mut j = i + open;
        let mut close = None;
        while j < bytes.len() {
            if bytes[j] == b'`' {
                let run = run_at(j);
                if run == open {
                    close = Some(j);
                    break;
                }
                j += run;
            } else {
                j += 1;
            }
        }
        let Some(close) = close else {
            i += open;
            continue;
        };
        spans.push((i, text[i + open..close].replace('\n', " ")));
        for byte in &mut masked[i..close + open] {
            if *byte != b'\n' {
                *byte = b' ';
            }
        }
        i = close + open;
    }
    // Only whole UTF-8 sequences were replaced, each byte by a space: still UTF-8.
    let masked = String::from_utf8(masked).expect("masking keeps UTF-8");
    (masked, spans)
}

/// The destinations of the links of a paragraph whose code spans are masked: `[t](dest)`,
/// `![a](dest)`, `[label]: dest`, `href="dest"`, `src="dest"`; each with its offset.
fn link_destinations(text: &str) -> Vec<(usize, String)> {
    let bytes = text.as_bytes();
    let mut found = Vec::new();
    let mut i = 0;
    while i + 1 < bytes.len() {
        if bytes[i] == b']' && bytes[i + 1] == b'(' && (i == 0 || bytes[i - 1] != b'\\') {
            let mut j = i + 2;
            while j < bytes.len() && bytes[j].is_ascii_whitespace() {
                j += 1;
            }
            let dest = if bytes.get(j) == Some(&b'<') {
                let end = text[j..].find('>').map_or(bytes.len(), |e| j + e);
                &text[j + 1..end.max(j + 1)]
            } else {
                let mut depth = 0usize;
                let mut end = j;
                while end < bytes.len() && !bytes[end].is_ascii_whitespace() {
                    match bytes[end] {
                        b'\\' => end += 1,
                        b'(' => depth += 1,
                        b')' if depth == 0 => break,
                        b')' => depth -= 1,
                        _ => {}
                    }
                    end += 1;
                }
                &text[j..end.min(bytes.len())]
            };
            found.push((i, dest.to_owned()));
        }
        i += 1;
    }
    // Reference definitions: `[label]: dest` at the start of a line (not a footnote `[^1]:`).
    let mut offset = 0;
    for line in text.split('\n') {
        let trimmed = line.trim_start();
        if trimmed.starts_with('[')
            && !trimmed.starts_with("[^")
            && line.len() - trimmed.len() <= 3
            && let Some(close) = trimmed.find("]:")
        {
            let rest = trimmed[close + 2..].trim_start();
            let dest = rest.split_whitespace().next().unwrap_or("");
            let dest = dest.trim_start_matches('<').trim_end_matches('>');
            found.push((offset, dest.to_owned()));
        }
        offset += line.len() + 1;
    }
    found.extend(attribute_values(text, "href=\""));
    found.extend(attribute_values(text, "src=\""));
    found.sort();
    found
}

/// The values of an HTML attribute (`prefix` is `href="` and the like), each with its offset.
fn attribute_values(text: &str, prefix: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = text[from..].find(prefix) {
        let start = from + at + prefix.len();
        let before = text[..from + at].chars().next_back();
        let end = text[start..].find('"').map_or(text.len(), |e| start + e);
        if before.is_none_or(char::is_whitespace) {
            found.push((from + at, text[start..end].to_owned()));
        }
        from = end.max(start);
    }
    found
}

/// The text of the headings of a paragraph: ATX (`## Title`, a closing run of `#` dropped) and
/// setext (a line under the paragraph of only `=` or `-`).
fn headings(paragraph: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut since = 0; // the first line of the text a setext underline would make a heading
    let lines: Vec<&str> = paragraph.split('\n').collect();
    for (index, line) in lines.iter().enumerate() {
        let indent = line.len() - line.trim_start().len();
        let trimmed = line.trim();
        if indent > 3 {
            continue;
        }
        let hashes = trimmed.chars().take_while(|c| *c == '#').count();
        if (1..=6).contains(&hashes)
            && trimmed[hashes..]
                .chars()
                .next()
                .is_none_or(char::is_whitespace)
        {
            let mut text = trimmed[hashes..].trim();
            let closing = text.trim_end_matches('#');
            if closing.is_empty() || closing.ends_with(char::is_whitespace) {
                text = closing.trim_end();
            }
            found.push(text.to_owned());
            since = index + 1;
        } else if index > since
            && !trimmed.is_empty()
            && (trimmed.chars().all(|c| c == '=') || trimmed.chars().all(|c| c == '-'))
        {
            found.push(lines[since..index].join(" ").trim().to_owned());
            since = index + 1;
        }
    }
    found
}

/// The anchor GitHub gives a heading: its text as rendered (links as their text, no backticks,
/// no `*`, no HTML tags outside code), lower-cased, every character but letters, digits, `_`,
/// `-` and spaces removed, each space a `-`.
fn slug(heading: &str) -> String {
    let rendered = heading_text(heading);
    rendered
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// A heading's text as rendered: `[text](url)` as `text`, backticks and `*` dropped, HTML tags
/// (outside code) dropped.
fn heading_text(heading: &str) -> String {
    let chars: Vec<char> = heading.chars().collect();
    let mut out = String::new();
    let mut in_code = false;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '`' => in_code = !in_code,
            '*' if !in_code => {}
            '!' if !in_code && chars.get(i + 1) == Some(&'[') => {}
            '[' if !in_code => {}
            ']' if !in_code && chars.get(i + 1) == Some(&'(') => {
                // Skip the destination.
                let mut depth = 0;
                i += 1;
                while i < chars.len() {
                    match chars[i] {
                        '(' => depth += 1,
                        ')' => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                    i += 1;
                }
            }
            ']' if !in_code => {}
            '<' if !in_code
                && chars
                    .get(i + 1)
                    .is_some_and(|n| n.is_ascii_alphabetic() || *n == '/') =>
            {
                while i < chars.len() && chars[i] != '>' {
                    i += 1;
                }
            }
            _ => out.push(c),
        }
        i += 1;
    }
    out
}

/// The anchors of the Markdown files links point into, read once each.
#[derive(Default)]
struct Anchors {
    of: HashMap<PathBuf, BTreeSet<String>>,
}

impl Anchors {
    fn of(&mut self, root: &Path, path: &Path) -> &BTreeSet<String> {
        self.of
            .entry(path.to_path_buf())
            .or_insert_with(|| Markdown::read(root, path).anchors())
    }
}

/// Whether a link of the file `from` leads somewhere: `Ok` for a link that is not relative (a
/// scheme such as `https:` or `mailto:`, or `//host`), else the file or folder must exist inside
/// the repository, and a fragment into a Markdown file must be one of its anchors.
fn check_link(root: &Path, from: &Path, dest: &str, anchors: &mut Anchors) -> Result<(), String> {
    let scheme = dest.split_once(':').is_some_and(|(s, _)| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c))
    });
    if scheme || dest.starts_with("//") {
        return Ok(());
    }
    if dest.is_empty() {
        return Err("an empty link".to_owned());
    }
    let (path, fragment) = dest.split_once('#').unwrap_or((dest, ""));
    let path = path.split_once('?').map_or(path, |(p, _)| p);
    let path = percent_decode(path);
    let target = if path.is_empty() {
        from.to_path_buf()
    } else if let Some(from_root) = path.strip_prefix('/') {
        root.join(from_root)
    } else {
        from.parent().unwrap_or(root).join(&path)
    };
    let target = match normalize(&target) {
        Some(target) if target.starts_with(root) => target,
        _ => return Err("it leads out of the repository".to_owned()),
    };
    if !target.exists() {
        return Err(format!("no such file: {}", relative(root, &target)));
    }
    let fragment = percent_decode(fragment);
    if fragment.is_empty() || target.extension().is_none_or(|e| e != "md") {
        return Ok(());
    }
    let known = anchors.of(root, &target);
    if known.contains(&fragment) {
        return Ok(());
    }
    Err(format!(
        "{} has no heading with the anchor `#{fragment}`",
        relative(root, &target)
    ))
}

// ----- commands shown -----

/// Each `capability <words>` in `text`, by offset: `capability` as a word of its own (not
/// `capability-cli`, `capability::x`, `"capability"`), followed by white space; and
/// `capability-cli -- <words>` (`cargo run -p capability-cli -- keygen`).
fn invocations(text: &str) -> Vec<(usize, Vec<String>)> {
    let mut found = Vec::new();
    for (name, after) in [("capability", ""), ("capability-cli", " --")] {
        let mut from = 0;
        while let Some(at) = text[from..].find(name) {
            let start = from + at;
            let end = start + name.len();
            from = end;
            let before = text[..start].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || "_-.:\"'".contains(c)) {
                continue;
            }
            let rest = &text[end..];
            let Some(rest) = rest.strip_prefix(after) else {
                continue;
            };
            if !rest.starts_with(char::is_whitespace) {
                continue;
            }
            // A command's words end with its line (`--dir ~/capability` ends one line, it does
            // not start a command on the next).
            let line = rest.split('\n').next().unwrap_or("");
            let words: Vec<String> = line.split_whitespace().take(3).map(str::to_owned).collect();
            if !words.is_empty() {
                found.push((start, words));
            }
        }
    }
    found.sort();
    found
}

/// Each `"command": "capability", "args": ["gateway", ...]` of a JSON text (a client's
/// `mcpServers` entry), by the offset of `"capability"`.
fn json_invocations(text: &str) -> Vec<(usize, Vec<String>)> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = text[from..].find("\"capability\"") {
        let start = from + at;
        from = start + 1;
        let before = text[..start].trim_end();
        let Some(before) = before.strip_suffix(':') else {
            continue;
        };
        if !before.trim_end().ends_with("\"command\"") {
            continue;
        }
        let Some(args) = text[start..].find("\"args\"") else {
            continue;
        };
        let list = &text[start + args..];
        let Some(open) = list.find('[') else { continue };
        let close = list[open..].find(']').map_or(list.len(), |c| open + c);
        let words: Vec<String> = list[open + 1..close]
            .split(',')
            .map(|w| w.trim().trim_matches('"').to_owned())
            .filter(|w| !w.is_empty())
            .take(3)
            .collect();
        if !words.is_empty() {
            found.push((start, words));
        }
    }
    found
}

/// The subcommands of a command, each with its own; `required` when a word must follow.
#[derive(Debug, Default)]
struct Subcommands {
    required: bool,
    children: BTreeMap<String, Subcommands>,
}

impl Subcommands {
    /// The subcommands of the `#[derive(Parser)]` struct of `main.rs`, read from the sources
    /// under `src`.
    fn of_cli(src: &Path) -> Subcommands {
        let mut items = Vec::new();
        for file in files_with_extension(src, &["rs"]) {
            items.extend(rust::items(&rust::tokenize(&read(&file))));
        }
        let parser = items
            .iter()
            .find(|i| !i.is_enum && i.derives("Parser"))
            .expect("a #[derive(Parser)] struct in capability-cli/src");
        let mut tree = Subcommands::default();
        rust::subcommands_of_fields(&items, &parser.entries, &mut tree, 0);
        tree
    }

    /// Whether `capability <words>` names subcommands that exist: the first word (unless it is
    /// an option or a placeholder such as `<subcommand>`), and under a subcommand that has its
    /// own, the next bare word.
    fn check(&self, words: &[String]) -> Result<(), String> {
        let mut node = self;
        let mut path = String::from("capability");
        for word in words {
            if node.children.is_empty() {
                return Ok(());
            }
            let word = word.trim_end_matches(|c: char| !c.is_ascii_alphanumeric());
            if !word.starts_with(|c: char| c.is_ascii_lowercase()) {
                return Ok(()); // an option, a placeholder, a comment
            }
            // Alternatives (`capability audit verify|replay|stats`): each must exist.
            for alternative in word.split('|') {
                node.has(&path, alternative)?;
            }
            match node.children.get(word) {
                Some(child) => {
                    path.push(' ');
                    path.push_str(word);
                    node = child;
                }
                None => return Ok(()), // `help`, or alternatives
            }
        }
        Ok(())
    }

    /// Whether the subcommand `path` has the subcommand `word` (clap adds `help` to each).
    fn has(&self, path: &str, word: &str) -> Result<(), String> {
        if word == "help" || self.children.contains_key(word) {
            return Ok(());
        }
        let known: Vec<&str> = self.children.keys().map(String::as_str).collect();
        Err(format!(
            "`{path}` has no subcommand `{word}` (it has: {})",
            known.join(", ")
        ))
    }
}

/// clap's name for a variant: kebab-case (`DbMigrate` is `db-migrate`).
fn kebab(name: &str) -> String {
    let mut out = String::new();
    let mut previous: Option<char> = None;
    for c in name.chars() {
        if c.is_ascii_uppercase() {
            if previous.is_some_and(|p| p.is_ascii_lowercase() || p.is_ascii_digit()) {
                out.push('-');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
        previous = Some(c);
    }
    out
}

/// Just enough of Rust's syntax to find clap's derives: tokens without comments, and the
/// structs and enums with their attributes and entries (fields or variants).
mod rust {
    use super::{Subcommands, kebab};

    #[derive(Clone, Debug, PartialEq)]
    pub enum Tok {
        Ident(String),
        Punct(char),
        Str(String),
        Other,
    }

    /// The tokens of a source file; comments dropped, string literals kept as their text.
    pub fn tokenize(source: &str) -> Vec<Tok> {
        let chars: Vec<char> = source.chars().collect();
        let mut tokens = Vec::new();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            let next = chars.get(i + 1).copied();
            if c.is_whitespace() {
                i += 1;
            } else if c == '/' && next == Some('/') {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            } else if c == '/' && next == Some('*') {
                let mut depth = 0;
                while i < chars.len() {
                    if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                        depth += 1;
                        i += 2;
                    } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                        depth -= 1;
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        i += 1;
                    }
                }
            } else if let Some((text, end)) = raw_string(&chars, i) {
                tokens.push(Tok::Str(text));
                i = end;
            } else if c == '"' {
                let mut text = String::new();
                i += 1;
                while i < chars.len() && chars[i] != '"' {
                    if chars[i] == '\\' {
                        i += 1;
                    }
                    if let Some(c) = chars.get(i) {
                        text.push(*c);
                    }
                    i += 1;
                }
                tokens.push(Tok::Str(text));
                i += 1;
            } else if c == '\'' {
                // A char literal ('x', '\n', '\u{7f}') or a lifetime ('a).
                if next == Some('\\') {
                    i += 2;
                    while i < chars.len() && chars[i] != '\'' {
                        i += 1;
                    }
                    i += 1;
                } else if chars.get(i + 2) == Some(&'\'') {
                    i += 3;
                } else {
                    i += 1;
                    while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                        i += 1;
                    }
                }
                tokens.push(Tok::Other);
            } else if c.is_alphabetic() || c == '_' {
                let start = i;
                while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
                tokens.push(Tok::Ident(chars[start..i].iter().collect()));
            } else if c.is_ascii_digit() {
                while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
                tokens.push(Tok::Other);
            } else {
                tokens.push(Tok::Punct(c));
                i += 1;
            }
        }
        tokens
    }

    /// A raw string (`r"..."`, `r#"..."#`, `br"..."`) starting at `i`: its text and where it
    /// ends.
    fn raw_string(chars: &[char], i: usize) -> Option<(String, usize)> {
        let mut j = i;
        if chars.get(j) == Some(&'b') {
            j += 1;
        }
        if chars.get(j) != Some(&'r')
            || (i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_'))
        {
            return None;
        }
        j += 1;
        let hashes = chars[j..].iter().take_while(|c| **c == '#').count();
        j += hashes;
        if chars.get(j) != Some(&'"') {
            return None;
        }
        let start = j + 1;
        let mut k = start;
        while k < chars.len() {
            if chars[k] == '"'
                && chars[k + 1..]
                    .iter()
                    .take(hashes)
                    .filter(|c| **c == '#')
                    .count()
                    == hashes
            {
                return Some((chars[start..k].iter().collect(), k + 1 + hashes));
            }
            k += 1;
        }
        Some((chars[start..].iter().collect(), chars.len()))
    }

    /// A struct or an enum.
    #[derive(Debug)]
    pub struct Item {
        pub is_enum: bool,
        pub name: String,
        attributes: Vec<Vec<Tok>>,
        /// Its fields or variants.
        pub entries: Vec<Entry>,
    }

    impl Item {
        /// Whether `#[derive(..)]` names `what` (`Subcommand`, `clap::Subcommand`).
        pub fn derives(&self, what: &str) -> bool {
            self.attributes.iter().any(|attribute| {
                attribute.first() == Some(&Tok::Ident("derive".into()))
                    && attribute.contains(&Tok::Ident(what.into()))
            })
        }
    }

    /// A field or a variant: its attributes, its name, and what follows the name (a field's
    /// type, a variant's fields).
    #[derive(Debug)]
    pub struct Entry {
        attributes: Vec<Vec<Tok>>,
        name: String,
        /// A field's type, or a tuple variant's types.
        types: Vec<Tok>,
        /// A struct variant's fields.
        fields: Vec<Entry>,
    }

    impl Entry {
        /// Whether a `#[command(..)]` attribute holds the word `what` (`subcommand`, `flatten`).
        fn command_says(&self, what: &str) -> bool {
            self.attributes.iter().any(|attribute| {
                matches!(attribute.first(), Some(Tok::Ident(a)) if a == "command" || a == "clap")
                    && attribute.contains(&Tok::Ident(what.into()))
            })
        }

        /// `#[command(name = "..")]`, if given.
        fn renamed(&self) -> Option<String> {
            for attribute in &self.attributes {
                for window in attribute.windows(3) {
                    if let [Tok::Ident(key), Tok::Punct('='), Tok::Str(value)] = window
                        && key == "name"
                    {
                        return Some(value.clone());
                    }
                }
            }
            None
        }

        /// The type named (the last path segment, past `Option` and `Box`), and whether it is
        /// required (not an `Option`).
        fn named_type(&self) -> Option<(String, bool)> {
            let idents: Vec<&str> = self
                .types
                .iter()
                .filter_map(|t| match t {
                    Tok::Ident(name) => Some(name.as_str()),
                    _ => None,
                })
                .collect();
            let optional = idents.first() == Some(&"Option");
            let name = idents
                .iter()
                .rev()
                .find(|n| !matches!(**n, "Option" | "Box" | "crate" | "self" | "super"))?;
            Some(((*name).to_owned(), !optional))
        }
    }

    /// The structs and enums of a file's tokens.
    pub fn items(tokens: &[Tok]) -> Vec<Item> {
        let mut items = Vec::new();
        let mut attributes = Vec::new();
        let mut i = 0;
        while i < tokens.len() {
            match &tokens[i] {
                Tok::Punct('#') if tokens.get(i + 1) == Some(&Tok::Punct('[')) => {
                    let end = matching(tokens, i + 1);
                    attributes.push(tokens[i + 2..end].to_vec());
                    i = end + 1;
                }
                Tok::Ident(word) if word == "struct" || word == "enum" => {
                    let is_enum = word == "enum";
                    let Some(Tok::Ident(name)) = tokens.get(i + 1) else {
                        attributes.clear();
                        i += 1;
                        continue;
                    };
                    let mut j = i + 2;
                    while j < tokens.len() && !matches!(tokens[j], Tok::Punct('{' | ';' | '(')) {
                        j += 1;
                    }
                    let mut entries = Vec::new();
                    if tokens.get(j) == Some(&Tok::Punct('{')) {
                        let end = matching(tokens, j);
                        entries = parse_entries(&tokens[j + 1..end], is_enum);
                        j = end;
                    }
                    items.push(Item {
                        is_enum,
                        name: name.clone(),
                        attributes: std::mem::take(&mut attributes),
                        entries,
                    });
                    i = j + 1;
                }
                Tok::Ident(word) if matches!(word.as_str(), "pub" | "crate" | "in" | "super") => {
                    i += 1
                }
                Tok::Punct('(' | ')') => i += 1,
                _ => {
                    attributes.clear();
                    i += 1;
                }
            }
        }
        items
    }

    /// The index of the bracket closing the one at `open` (`(`, `[`, `{`).
    fn matching(tokens: &[Tok], open: usize) -> usize {
        let mut depth = 0usize;
        for (k, token) in tokens.iter().enumerate().skip(open) {
            match token {
                Tok::Punct('(' | '[' | '{') => depth += 1,
                Tok::Punct(')' | ']' | '}') => {
                    depth -= 1;
                    if depth == 0 {
                        return k;
                    }
                }
                _ => {}
            }
        }
        tokens.len()
    }

    /// The entries of a body, split at the commas outside brackets and `<..>`.
    fn parse_entries(body: &[Tok], variants: bool) -> Vec<Entry> {
        let mut entries = Vec::new();
        let mut depth = 0i32;
        let mut start = 0;
        for (k, token) in body.iter().enumerate() {
            match token {
                Tok::Punct('(' | '[' | '{' | '<') => depth += 1,
                Tok::Punct('>') if k > 0 && body[k - 1] == Tok::Punct('-') => {}
                Tok::Punct(')' | ']' | '}' | '>') => depth -= 1,
                Tok::Punct(',') if depth == 0 => {
                    entries.extend(parse_entry(&body[start..k], variants));
                    start = k + 1;
                }
                _ => {}
            }
        }
        entries.extend(parse_entry(&body[start..], variants));
        entries
    }

    fn parse_entry(tokens: &[Tok], variant: bool) -> Option<Entry> {
        let mut attributes = Vec::new();
        let mut i = 0;
        while tokens.get(i) == Some(&Tok::Punct('#')) && tokens.get(i + 1) == Some(&Tok::Punct('['))
        {
            let end = matching(tokens, i + 1);
            attributes.push(tokens[(i + 2).min(end)..end].to_vec());
            i = end + 1;
        }
        if tokens.get(i) == Some(&Tok::Ident("pub".into())) {
            i += 1;
            if tokens.get(i) == Some(&Tok::Punct('(')) {
                i = matching(tokens, i) + 1;
            }
        }
        let Some(Tok::Ident(name)) = tokens.get(i) else {
            return None;
        };
        let rest = &tokens[i + 1..];
        let mut entry = Entry {
            attributes,
            name: name.clone(),
            types: Vec::new(),
            fields: Vec::new(),
        };
        if variant {
            match rest.first() {
                Some(Tok::Punct('(')) => entry.types = rest[1..matching(rest, 0)].to_vec(),
                Some(Tok::Punct('{')) => {
                    entry.fields = parse_entries(&rest[1..matching(rest, 0)], false)
                }
                _ => {}
            }
        } else if rest.first() == Some(&Tok::Punct(':')) {
            entry.types = rest[1..].to_vec();
        }
        Some(entry)
    }

    /// Adds to `tree` the subcommands a struct's (or a struct variant's) fields lead to: a
    /// `#[command(subcommand)]` field's enum, and those of `#[command(flatten)]` fields.
    pub fn subcommands_of_fields(
        items: &[Item],
        fields: &[Entry],
        tree: &mut Subcommands,
        depth: usize,
    ) {
        if depth > 8 {
            return;
        }
        for field in fields {
            let Some((ty, required)) = field.named_type() else {
                continue;
            };
            if field.command_says("subcommand") {
                tree.required = required;
                subcommands_of_enum(items, &ty, tree, depth + 1);
            } else if field.command_says("flatten")
                && let Some(args) = items.iter().find(|i| !i.is_enum && i.name == ty)
            {
                subcommands_of_fields(items, &args.entries, tree, depth + 1);
            }
        }
    }

    /// Adds to `tree` the variants of the `#[derive(Subcommand)]` enum `name`, each with the
    /// subcommands it leads to.
    fn subcommands_of_enum(items: &[Item], name: &str, tree: &mut Subcommands, depth: usize) {
        let Some(command) = items
            .iter()
            .find(|i| i.is_enum && i.name == name && i.derives("Subcommand"))
        else {
            return;
        };
        for variant in &command.entries {
            let mut child = Subcommands::default();
            subcommands_of_fields(items, &variant.fields, &mut child, depth + 1);
            if let Some((ty, _)) = variant.named_type() {
                if variant.command_says("subcommand") {
                    child.required = true;
                    subcommands_of_enum(items, &ty, &mut child, depth + 1);
                } else if let Some(args) = items.iter().find(|i| !i.is_enum && i.name == ty) {
                    subcommands_of_fields(items, &args.entries, &mut child, depth + 1);
                }
            }
            let name = variant.renamed().unwrap_or_else(|| kebab(&variant.name));
            tree.children.insert(name, child);
        }
    }
}

// ----- ADR citations -----

/// A citation of an ADR in a file: `ADR-105`, `ADR 020`, `ADR-105 D2`, `adr-105-d2`.
#[derive(Debug, PartialEq)]
struct Citation {
    line: usize,
    number: String,
    decision: Option<String>,
}

/// Every ADR citation of a text: `ADR` (any case) then `-` or a space and three digits, then
/// optionally `'s`, and a decision `D<n>` after a space or a `-`.
fn adr_citations(text: &str) -> Vec<Citation> {
    let mut found = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let lower = line.to_ascii_lowercase();
        let bytes = lower.as_bytes();
        let mut from = 0;
        while let Some(at) = lower[from..].find("adr") {
            let start = from + at;
            from = start + 3;
            if start > 0 && (bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'_') {
                continue;
            }
            let rest = &lower[start + 3..];
            let Some(rest) = rest.strip_prefix('-').or_else(|| rest.strip_prefix(' ')) else {
                continue;
            };
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            if digits.len() != 3 {
                continue;
            }
            let after = &rest[3..];
            let after = after.strip_prefix("'s").unwrap_or(after);
            let decision = after
                .strip_prefix(' ')
                .or_else(|| after.strip_prefix('-'))
                .and_then(|d| d.strip_prefix('d'))
                .map(|d| {
                    d.chars()
                        .take_while(char::is_ascii_digit)
                        .collect::<String>()
                })
                .filter(|n| !n.is_empty())
                .map(|n| format!("D{n}"));
            found.push(Citation {
                line: index + 1,
                number: digits,
                decision,
            });
        }
    }
    found
}

/// The record of ADR `number` under `adr_dir` (`105-mcp-agent-loop-governance.md`): its file
/// name and the decisions its headings number (`### D2. The role permission matrix`).
fn adr_record(adr_dir: &Path, number: &str) -> Option<(String, BTreeSet<String>)> {
    let prefix = format!("{number}-");
    let entry = fs::read_dir(adr_dir)
        .ok()?
        .flatten()
        .find(|e| e.file_name().to_string_lossy().starts_with(&prefix))?;
    let doc = Markdown::read(adr_dir, &entry.path());
    let mut decisions = BTreeSet::new();
    for paragraph in &doc.paragraphs {
        for heading in headings(&paragraph.text) {
            let digits: String = heading
                .strip_prefix('D')
                .unwrap_or("")
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            if !digits.is_empty() {
                decisions.insert(format!("D{digits}"));
            }
        }
    }
    Some((doc.rel, decisions))
}

/// The scanner itself.
mod scanner {
    use super::*;

    /// `text` read as a Markdown file.
    fn markdown(text: &str) -> Markdown {
        let (fences, paragraphs) = split_blocks(text);
        Markdown {
            path: PathBuf::new(),
            rel: String::new(),
            fences,
            paragraphs,
        }
    }

    #[test]
    fn slugs_follow_githubs_rules() {
        assert_eq!(slug("Two commands"), "two-commands");
        assert_eq!(
            slug("Govern any MCP client: `capability proxy`"),
            "govern-any-mcp-client-capability-proxy"
        );
        assert_eq!(
            slug("The registry and `inventory`"),
            "the-registry-and-inventory"
        );
        assert_eq!(
            slug("D2. The role permission matrix"),
            "d2-the-role-permission-matrix"
        );
        assert_eq!(slug("A [link](x.md) and **bold**"), "a-link-and-bold");
        assert_eq!(slug("Ünïcode & snake_case"), "ünïcode--snake_case");
        assert_eq!(slug("Title <a id=\"x\"></a>"), "title");
    }

    #[test]
    fn repeated_headings_are_numbered_and_code_is_no_heading() {
        let (fences, paragraphs) =
            split_blocks("# A\n\n```toml\n# not a heading\n```\n\n## A\n\nSetext\n---\n");
        assert_eq!(fences.len(), 1);
        let doc = Markdown {
            path: PathBuf::new(),
            rel: String::new(),
            fences,
            paragraphs,
        };
        let anchors: Vec<String> = doc.anchors().into_iter().collect();
        assert_eq!(anchors, ["a", "a-1", "setext"]);
    }

    #[test]
    fn links_in_code_are_no_links_and_lines_are_counted() {
        let text = "See [it](a.md#x) and `[not](b.md)`,\n``[nor](c.md)`` but\n![img](d.png \"t\")\n\n\
                    ```md\n[no](e.md)\n```\n\n[ref]: f.md\n<a href=\"g.md\">g</a> and [p](h(1).md)\n";
        let doc = markdown(text);
        let links: Vec<(usize, String)> =
            doc.links().into_iter().map(|l| (l.line, l.dest)).collect();
        let expected = [
            (1, "a.md#x"),
            (3, "d.png"),
            (9, "f.md"),
            (10, "g.md"),
            (10, "h(1).md"),
        ];
        let expected: Vec<(usize, String)> = expected
            .iter()
            .map(|(l, d)| (*l, (*d).to_owned()))
            .collect();
        assert_eq!(links, expected);
    }

    #[test]
    fn a_code_span_may_cross_a_line_and_an_unclosed_backtick_is_literal() {
        let (masked, spans) = mask_code_spans("a `capability\n approve` b ` c");
        assert_eq!(spans, [(2, "capability  approve".to_owned())]);
        assert_eq!(
            masked,
            format!("a {}\n{} b ` c", " ".repeat(11), " ".repeat(9))
        );
    }

    #[test]
    fn commands_are_found_in_blocks_spans_and_json() {
        let text = "```sh\ncapability db migrate state.db   # or postgres://\n\
                    cargo run -p capability-cli -- keygen --out a.key\n```\n\n\
                    Run `capability audit verify` on `capability-cli/tests` and `capability::rmcp`.\n\n\
                    ```json\n{\"command\": \"capability\", \"args\": [\"gateway\",\n  \"--policy\"]}\n```\n";
        let doc = markdown(text);
        let shown: Vec<(usize, String)> =
            doc.commands().iter().map(|s| (s.line, s.text())).collect();
        let expected = [
            (2, "capability db migrate state.db"),
            (3, "capability keygen --out a.key"),
            (6, "capability audit verify"),
            (9, "capability gateway --policy"),
        ];
        let expected: Vec<(usize, String)> = expected
            .iter()
            .map(|(l, t)| (*l, (*t).to_owned()))
            .collect();
        assert_eq!(shown, expected);
    }

    #[test]
    fn named_tests_are_code_spans_of_a_package_and_a_path() {
        let text = "| a guarantee | `capability-gate: write_gate::files_round_trip` |\n\
                    | another | `capability-cli: witness_feed::*`, `alg: none`, `a: b c` |\n";
        let doc = markdown(text);
        let named: Vec<(usize, String, String)> = doc.named_tests();
        let expected = [
            (1, "capability-gate", "write_gate::files_round_trip"),
            (2, "capability-cli", "witness_feed::*"),
            (2, "alg", "none"),
        ]
        .map(|(l, p, t)| (l, p.to_owned(), t.to_owned()));
        assert_eq!(named, expected);

        let files = vec![
            (
                PathBuf::from("tests/it/write_gate.rs"),
                "fn files_round_trip() {}".to_owned(),
            ),
            (
                PathBuf::from("tests/it/proxy_common/mod.rs"),
                "fn spawn() {}".to_owned(),
            ),
        ];
        assert_eq!(names_a_test(&files, "write_gate::files_round_trip"), Ok(()));
        assert_eq!(names_a_test(&files, "write_gate"), Ok(()));
        assert_eq!(names_a_test(&files, "proxy_common::spawn"), Ok(()));
        assert_eq!(names_a_test(&files, "write_gate::*"), Ok(()));
        assert!(names_a_test(&files, "write_gate::spawn").is_err());
        assert!(names_a_test(&files, "policy").is_err());
        assert!(names_a_test(&files, "policy::files_round_trip").is_err());
    }

    #[test]
    fn an_ignored_rust_block_is_told_from_others() {
        assert!(unexplained_ignore("```rust,ignore", Some("let x = 1;")));
        assert!(unexplained_ignore("```rust, ignore", None));
        assert!(!unexplained_ignore(
            "```rust,ignore",
            Some("// Not a doctest: a fragment")
        ));
        assert!(!unexplained_ignore("```rust,no_run", Some("let x = 1;")));
        assert!(!unexplained_ignore("```text", Some("ignore")));
        assert!(!unexplained_ignore("```rust", Some("let x = 1;")));
    }

    #[test]
    fn subcommands_are_read_from_clap_derives() {
        let source = r#"
            #[derive(Parser)]
            struct Cli { #[command(subcommand)] command: Command }
            #[derive(Subcommand, Debug)]
            enum Command {
                /// Braces in a doc comment: `\u{..}`
                Inspect(Common),
                #[command(subcommand)]
                Audit(AuditCommand),
                Grant(grant::GrantArgs),
                #[command(name = "db-admin")]
                Db { #[arg(long, default_value = "{x}")] url: String },
                KeyGen,
            }
            #[derive(Subcommand)]
            enum AuditCommand { Verify { target: String }, Stats(Common) }
            #[derive(Args)]
            pub struct GrantArgs { #[command(subcommand)] command: Option<GrantCommand>, key: Option<PathBuf> }
            #[derive(Subcommand)]
            enum GrantCommand { Revoke { id: String } }
        "#;
        let items = rust::items(&rust::tokenize(source));
        let parser = items.iter().find(|i| i.derives("Parser")).expect("parser");
        let mut cli = Subcommands::default();
        rust::subcommands_of_fields(&items, &parser.entries, &mut cli, 0);
        let top: Vec<&str> = cli.children.keys().map(String::as_str).collect();
        assert_eq!(top, ["audit", "db-admin", "grant", "inspect", "key-gen"]);
        let words = |text: &str| text.split(' ').map(str::to_owned).collect::<Vec<_>>();
        assert!(cli.check(&words("audit verify x.jsonl")).is_ok());
        assert!(cli.check(&words("grant revoke --store s.db")).is_ok());
        assert!(cli.check(&words("grant --key a.key")).is_ok());
        assert!(cli.check(&words("inspect anything")).is_ok());
        assert!(cli.check(&words("<subcommand> --help")).is_ok());
        let error = cli
            .check(&words("audit stat x"))
            .expect_err("no such subcommand");
        assert!(
            error.contains("`capability audit` has no subcommand `stat`"),
            "{error}"
        );
        assert!(cli.check(&words("grant revok")).is_err());
        assert!(cli.check(&words("gateway --check")).is_err());
    }

    #[test]
    fn adr_citations_and_their_decisions() {
        let text = "// ADR-105 D2 and ADR-105's agents\nversion = \"adr-105-d2/2026\"\n(ADR 020: plans) MADR-105 ADR-1050";
        let found: Vec<(usize, String, Option<String>)> = adr_citations(text)
            .into_iter()
            .map(|c| (c.line, c.number, c.decision))
            .collect();
        assert_eq!(
            found,
            [
                (1, "105".to_owned(), Some("D2".to_owned())),
                (1, "105".to_owned(), None),
                (2, "105".to_owned(), Some("D2".to_owned())),
                (3, "020".to_owned(), None),
            ]
        );
    }

    #[test]
    fn links_out_of_the_repository_or_to_missing_files_and_headings_are_refused() {
        let root = root();
        let readme = root.join("README.md");
        let mut anchors = Anchors::default();
        let mut check = |dest: &str| check_link(&root, &readme, dest, &mut anchors);
        assert!(check("docs/threat-model.md").is_ok());
        assert!(check("#two-commands").is_ok());
        assert!(check("https://example.com/x").is_ok());
        assert!(check("src/").is_ok());
        assert!(check("docs/no-such-file.md").is_err());
        assert!(check("#no-such-heading").is_err());
        assert!(check("../../etc/passwd").is_err());
    }
}
