//! The command reference (`capability-cli/README.md`) is what the binary's `--help` prints, for
//! the command and every subcommand it has a heading for; and no subcommand lacks a heading.

use std::process::Command;

/// What `capability <args> --help` prints, each line without trailing white space.
fn help(args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_capability"))
        .args(args)
        .arg("--help")
        .output()
        .expect("runs");
    assert!(output.status.success(), "{args:?} --help failed");
    let text = String::from_utf8(output.stdout).expect("UTF-8");
    text.trim_end()
        .lines()
        .map(str::trim_end)
        .collect::<Vec<_>>()
        .join("\n")
}

/// The subcommands `capability <args> --help` lists (without `help`).
fn subcommands(text: &str) -> Vec<String> {
    let Some((_, list)) = text.split_once("\nCommands:\n") else {
        return Vec::new();
    };
    list.lines()
        .take_while(|line| line.starts_with("  "))
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_owned)
        .collect()
}

/// Each `capability ...` heading of the reference and the first `text` block below it, the
/// first block of the section "Every subcommand and flag" under the heading `capability`.
fn documented() -> Vec<(Vec<String>, String)> {
    let reference = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("capability-cli/README.md");
    let (_, section) = reference
        .split_once("## Every subcommand and flag")
        .expect("the section of every subcommand");
    let mut found = Vec::new();
    let mut words = vec!["capability".to_owned()];
    let mut lines = section.lines();
    while let Some(line) = lines.next() {
        if let Some(heading) = line
            .strip_prefix("### `")
            .or_else(|| line.strip_prefix("#### `"))
        {
            words = heading
                .trim_end_matches('`')
                .split_whitespace()
                .map(str::to_owned)
                .collect();
        } else if line == "```text" {
            let block: Vec<&str> = lines.by_ref().take_while(|l| *l != "```").collect();
            found.push((words.clone(), block.join("\n")));
        }
    }
    found
}

#[test]
fn the_command_reference_is_what_help_prints_for_every_subcommand() {
    let documented = documented();
    let mut stale = Vec::new();
    for (words, block) in &documented {
        let args: Vec<&str> = words[1..].iter().map(String::as_str).collect();
        let printed = help(&args);
        if printed != *block {
            stale.push(format!(
                "{}:\n--- README\n{block}\n--- --help\n{printed}",
                words.join(" ")
            ));
        }
    }
    assert!(
        stale.is_empty(),
        "capability-cli/README.md differs from --help (paste the new --help):\n{}",
        stale.join("\n\n")
    );

    // Every subcommand, and every subcommand of those, has its heading.
    let headings: Vec<String> = documented.iter().map(|(w, _)| w.join(" ")).collect();
    let mut missing = Vec::new();
    for top in subcommands(&help(&[])) {
        let name = format!("capability {top}");
        if !headings.contains(&name) {
            missing.push(name.clone());
        }
        for sub in subcommands(&help(&[&top])) {
            let name = format!("capability {top} {sub}");
            if !headings.contains(&name) {
                missing.push(name);
            }
        }
    }
    assert!(
        missing.is_empty(),
        "subcommands without a section in capability-cli/README.md: {missing:?}"
    );
}
