//! `domino grammar check|convert` (owner: grammar work).
#[derive(clap::Subcommand, Debug)]
pub enum GrammarCommand {
    /// Check grammar files.
    Check { files: Vec<std::path::PathBuf> },
}
pub fn run(_cmd: GrammarCommand) -> anyhow::Result<()> { anyhow::bail!("not built yet") }
