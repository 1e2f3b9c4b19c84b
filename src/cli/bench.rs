//! `domino bench masks` (owner: engine work).
#[derive(clap::Subcommand, Debug)]
pub enum BenchCommand {
    /// Time mask computation.
    Masks {},
}
pub fn run(_cmd: BenchCommand) -> anyhow::Result<()> { anyhow::bail!("not built yet") }
