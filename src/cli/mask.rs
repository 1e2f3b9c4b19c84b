//! `domino mask` (owner: engine work).
#[derive(clap::Args, Debug)]
pub struct MaskArgs {}
pub fn run(_args: MaskArgs) -> anyhow::Result<()> { anyhow::bail!("not built yet") }
