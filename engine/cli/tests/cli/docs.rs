//! The docs and the program agree: every `memoria …` command line in README.md and docs/*.md
//! names a command that exists and only flags that command (or every command) takes.

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

fn help(cache: &mut HashMap<Vec<String>, Option<String>>, path: &[String]) -> Option<String> {
    if let Some(h) = cache.get(path) {
        return h.clone();
    }
    let home = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_memoria"))
        .env("MEMORIA_HOME", home.path())
        .args(path)
        .arg("--help")
        .output()
        .unwrap();
    let h = out
        .status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned());
    cache.insert(path.to_vec(), h.clone());
    h
}

#[test]
fn every_command_and_flag_the_docs_name_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = vec![root.join("README.md")];
    for e in std::fs::read_dir(root.join("docs")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "md") {
            files.push(p);
        }
    }
    let mut cache = HashMap::new();
    let global = help(&mut cache, &[]).expect("memoria --help");
    let (mut checked, mut wrong) = (0, Vec::new());
    let mut seen = std::collections::BTreeSet::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for (n, line) in text.lines().enumerate() {
            for (at, _) in line.match_indices("memoria ") {
                // `memoria` as a word of its own: not `memoria-sync`, not `$memoria`.
                if at > 0 && !line[..at].ends_with([' ', '`', '(', '$', '\t']) {
                    continue;
                }
                let rest = &line[at + "memoria ".len()..];
                let end = rest.find(['`', '|', '#', ')', ';']).unwrap_or(rest.len());
                let words: Vec<&str> = rest[..end].split_whitespace().collect();
                let mut path: Vec<String> = Vec::new();
                for w in &words {
                    if w.starts_with('-') || !w.chars().all(|c| c.is_ascii_lowercase() || c == '-')
                    {
                        break;
                    }
                    let mut next = path.clone();
                    next.push((*w).to_owned());
                    if help(&mut cache, &next).is_none() {
                        // A word after a command that has subcommands names one of them (a
                        // command with subcommands takes no words of its own here): one the
                        // program does not have is a doc that promises too much.
                        let has_subcommands = !path.is_empty()
                            && help(&mut cache, &path).is_some_and(|h| h.contains("\nCommands:"));
                        if has_subcommands {
                            wrong.push(format!(
                                "{}:{}: `memoria {}` has no subcommand {w}",
                                file.display(),
                                n + 1,
                                path.join(" ")
                            ));
                        }
                        break;
                    }
                    path = next;
                }
                if path.is_empty() {
                    continue; // prose: "memoria is …"
                }
                seen.insert(path.join(" "));
                let own = help(&mut cache, &path).unwrap_or_default();
                checked += 1;
                for w in words.iter().filter(|w| w.starts_with("--")) {
                    let flag: String = w
                        .chars()
                        .take_while(|c| c.is_ascii_lowercase() || *c == '-')
                        .collect();
                    if flag.len() > 2 && !own.contains(&flag) && !global.contains(&flag) {
                        wrong.push(format!(
                            "{}:{}: `memoria {}` has no {flag}",
                            file.display(),
                            n + 1,
                            path.join(" ")
                        ));
                    }
                }
            }
        }
    }
    assert!(
        checked > 50,
        "only {checked} command lines found in the docs"
    );
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // Commands a person finds only in the docs at the moment they need them: each must be
    // named there, and so checked above.
    for command in [
        "sync repoint",
        "sync confirm",
        "sync cancel",
        "hook claude-code",
    ] {
        assert!(seen.contains(command), "no doc names `memoria {command}`");
    }
}
