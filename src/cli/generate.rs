//! `domino generate` (owner: runtime/decode work).
#[derive(clap::Args, Debug)]
pub struct GenerateArgs {
    /// The prompt (read from stdin when omitted).
    pub prompt: Option<String>,
}
pub fn run(_args: GenerateArgs) -> anyhow::Result<()> { anyhow::bail!("not built yet") }
