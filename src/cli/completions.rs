//! `domino completions SHELL` and `domino man`: shell completions and man pages generated
//! from the clap definitions themselves (`clap_complete`, `clap_mangen`), so that they can
//! never disagree with `--help`. llama.cpp's multi-letter spellings (`-sys`, `-ngl`, `-cnv`)
//! are rewritten before clap sees them ([`crate::cli::LLAMA_FLAGS`]), so completions offer
//! their long forms.

use clap::CommandFactory;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Print a completion script for a shell.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  domino completions bash > ~/.local/share/bash-completion/completions/domino\n  domino completions zsh > ~/.zfunc/_domino\n  domino completions fish > ~/.config/fish/completions/domino.fish"
)]
pub struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// Print the man page (roff).
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  domino man | man -l -\n  domino man --dir ~/.local/share/man/man1"
)]
pub struct ManArgs {
    /// Write domino.1 and one page per subcommand (domino-generate.1, …) into this directory
    /// instead of printing domino.1.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

pub fn completions(args: CompletionsArgs) -> anyhow::Result<()> {
    let mut cmd = crate::cli::Cli::command();
    let mut out = std::io::stdout().lock();
    clap_complete::generate(args.shell, &mut cmd, "domino", &mut out);
    out.flush()?;
    Ok(())
}

/// The roff text of one command's man page.
fn render(cmd: clap::Command) -> anyhow::Result<Vec<u8>> {
    let mut buf = Vec::new();
    clap_mangen::Man::new(cmd).render(&mut buf)?;
    Ok(buf)
}

/// Write `domino.1` and `domino-SUB.1` for every subcommand (nested ones too) into `dir`;
/// returns the files written.
pub fn write_pages(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    use anyhow::Context;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut root = crate::cli::Cli::command();
    root.build();
    let mut written = Vec::new();
    let mut stack = vec![("domino".to_string(), root)];
    while let Some((name, cmd)) = stack.pop() {
        for sub in cmd.get_subcommands() {
            if sub.get_name() == "help" {
                continue;
            }
            let sub_name = format!("{name}-{}", sub.get_name());
            stack.push((sub_name.clone(), sub.clone().display_name(sub_name)));
        }
        let path = dir.join(format!("{name}.1"));
        std::fs::write(&path, render(cmd)?)
            .with_context(|| format!("writing {}", path.display()))?;
        written.push(path);
    }
    written.sort();
    Ok(written)
}

pub fn man(args: ManArgs) -> anyhow::Result<()> {
    match &args.dir {
        Some(dir) => {
            for path in write_pages(dir)? {
                println!("{}", path.display());
            }
        }
        None => {
            let mut out = std::io::stdout().lock();
            out.write_all(&render(crate::cli::Cli::command())?)?;
            out.flush()?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn man_pages_cover_every_subcommand_and_flag() {
        let dir = std::env::temp_dir().join(format!("domino-man-{}", std::process::id()));
        let pages = write_pages(&dir).unwrap();
        let names: Vec<String> = pages
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        for want in [
            "domino.1",
            "domino-generate.1",
            "domino-eval-gsm8k.1",
            "domino-man.1",
        ] {
            assert!(names.iter().any(|n| n == want), "{want} missing: {names:?}");
        }
        let generate = std::fs::read_to_string(dir.join("domino-generate.1")).unwrap();
        for flag in ["json\\-schema", "\\-\\-ctx", "system\\-prompt", "batch"] {
            assert!(generate.contains(flag), "{flag} missing from the page");
        }
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn completions_name_the_subcommands_and_flags() {
        let mut buf = Vec::new();
        clap_complete::generate(
            clap_complete::Shell::Bash,
            &mut crate::cli::Cli::command(),
            "domino",
            &mut buf,
        );
        let script = String::from_utf8(buf).unwrap();
        for word in ["generate", "--json-schema", "--ctx-size", "completions"] {
            assert!(script.contains(word), "{word} missing");
        }
    }
}
