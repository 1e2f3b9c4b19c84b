//! Parsing one REPL input into a prompt or a `:command`.
//!
//! A line whose first non-blank character is `:` is a command; anything else is a prompt
//! (a prompt that must start with `:` is written `\:…`). Every command is listed once in
//! [`COMMANDS`] with its argument shape and a one-line description: `:help`, tab completion and
//! the parser all read that table, so they cannot drift apart. Parsing is pure (no I/O) and
//! reports bad arguments as a message naming the command and what it expected.

use crate::constraint::parse_lookahead;
use std::path::PathBuf;

pub use crate::decode::methods::Method;

/// Every `:method` name, as `generate --method` spells them.
pub const METHOD_NAMES: &[&str] = &["domino", "naive", "none", "template", "llama-grammar"];

/// Parse a method name (as `generate --method` takes it).
pub fn parse_method(s: &str) -> Result<Method, String> {
    s.parse::<Method>().map_err(|_| {
        format!(
            "unknown method `{s}` (expected one of: {})",
            METHOD_NAMES.join(", ")
        )
    })
}

/// A parsed `:command`.
#[derive(Clone, Debug, PartialEq)]
pub enum Command {
    Help,
    Grammar(PathBuf),
    Schema(PathBuf),
    Regex(String),
    Json,
    NoConstraint,
    Method(Method),
    /// Lookahead; `None` = ∞.
    K(Option<u32>),
    Draft(usize),
    Temp(f32),
    Seed(u64),
    Max(usize),
    Chat(bool),
    /// Keep the conversation: each prompt is the next user turn after the earlier ones.
    Conversation(bool),
    /// Forget the conversation so far (the system prompt stays).
    Reset,
    Show,
    Stats,
    Mask,
    Save(PathBuf),
    Tokens(bool),
    /// Offer tools (`None` = stop offering them) with a `tool_choice`.
    Tools(Option<PathBuf>, String),
    Quit,
}

/// What kind of argument a command takes (drives completion as well as parsing).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgKind {
    None,
    File,
    Text,
    Word(&'static [&'static str]),
    Number,
}

/// One entry of the command table.
#[derive(Clone, Copy, Debug)]
pub struct CommandSpec {
    /// Name without the colon.
    pub name: &'static str,
    /// Argument shape as shown by `:help`.
    pub usage: &'static str,
    pub arg: ArgKind,
    pub help: &'static str,
}

const ON_OFF: &[&str] = &["on", "off"];

/// Every command, in the order `:help` lists them.
pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "help",
        usage: "",
        arg: ArgKind::None,
        help: "list the commands",
    },
    CommandSpec {
        name: "grammar",
        usage: "FILE",
        arg: ArgKind::File,
        help: "constrain to a grammar file (.gbnf, .lark, or .json schema)",
    },
    CommandSpec {
        name: "schema",
        usage: "FILE",
        arg: ArgKind::File,
        help: "constrain to a JSON Schema file",
    },
    CommandSpec {
        name: "regex",
        usage: "RE",
        arg: ArgKind::Text,
        help: "constrain to a regex matching the whole output",
    },
    CommandSpec {
        name: "json",
        usage: "",
        arg: ArgKind::None,
        help: "constrain to any JSON document",
    },
    CommandSpec {
        name: "none",
        usage: "",
        arg: ArgKind::None,
        help: "drop the constraint (free text)",
    },
    CommandSpec {
        name: "method",
        usage: "M",
        arg: ArgKind::Word(METHOD_NAMES),
        help: "domino, naive (k 0), none (unmasked), template (forced text), llama-grammar",
    },
    CommandSpec {
        name: "k",
        usage: "N|inf",
        arg: ArgKind::Word(&["inf", "0", "1", "2"]),
        help: "lookahead: terminal boundaries allowed inside one token (inf = minimally invasive)",
    },
    CommandSpec {
        name: "draft",
        usage: "S",
        arg: ArgKind::Number,
        help: "speculative draft length (0 = off; drafts stream without heat)",
    },
    CommandSpec {
        name: "temp",
        usage: "T",
        arg: ArgKind::Number,
        help: "sampling temperature (0 = greedy)",
    },
    CommandSpec {
        name: "seed",
        usage: "N",
        arg: ArgKind::Number,
        help: "random seed for sampling",
    },
    CommandSpec {
        name: "max",
        usage: "N",
        arg: ArgKind::Number,
        help: "maximum tokens per generation",
    },
    CommandSpec {
        name: "chat",
        usage: "on|off",
        arg: ArgKind::Word(ON_OFF),
        help: "wrap each prompt in the model's chat template",
    },
    CommandSpec {
        name: "conversation",
        usage: "on|off",
        arg: ArgKind::Word(ON_OFF),
        help: "multi-turn chat: each prompt follows the earlier turns (implies :chat on)",
    },
    CommandSpec {
        name: "reset",
        usage: "",
        arg: ArgKind::None,
        help: "forget the conversation so far (the system prompt stays)",
    },
    CommandSpec {
        name: "show",
        usage: "",
        arg: ArgKind::None,
        help: "show the current settings",
    },
    CommandSpec {
        name: "stats",
        usage: "",
        arg: ArgKind::None,
        help: "the last generation's stats as JSON (as in generate --format json)",
    },
    CommandSpec {
        name: "mask",
        usage: "",
        arg: ArgKind::None,
        help: "what the grammar allows next, with the model's probabilities",
    },
    CommandSpec {
        name: "tools",
        usage: "FILE [auto|required|NAME] | off",
        arg: ArgKind::File,
        help: "offer tools (OpenAI `tools` JSON): calls in the template's syntax, arguments constrained",
    },
    CommandSpec {
        name: "save",
        usage: "FILE",
        arg: ArgKind::File,
        help: "write the transcript as JSON Lines",
    },
    CommandSpec {
        name: "tokens",
        usage: "on|off",
        arg: ArgKind::Word(ON_OFF),
        help: "show token boundaries in the output",
    },
    CommandSpec {
        name: "quit",
        usage: "",
        arg: ArgKind::None,
        help: "leave (Ctrl-D also works)",
    },
];

/// The spec of a command name (without the colon).
pub fn spec(name: &str) -> Option<&'static CommandSpec> {
    COMMANDS.iter().find(|c| c.name == name)
}

/// One REPL input.
#[derive(Clone, Debug, PartialEq)]
pub enum Input {
    /// Nothing to do (a blank line).
    Empty,
    Prompt(String),
    Command(Command),
}

/// Parse one (possibly multi-line) input.
pub fn parse_input(text: &str) -> Result<Input, String> {
    let trimmed = text.trim_start();
    if trimmed.trim().is_empty() {
        return Ok(Input::Empty);
    }
    if let Some(rest) = trimmed.strip_prefix("\\:") {
        return Ok(Input::Prompt(format!(":{rest}")));
    }
    match trimmed.strip_prefix(':') {
        Some(rest) => parse_command(rest.trim()).map(Input::Command),
        None => Ok(Input::Prompt(text.to_string())),
    }
}

fn parse_on_off(name: &str, arg: &str) -> Result<bool, String> {
    match arg.to_ascii_lowercase().as_str() {
        "on" | "true" | "1" | "yes" => Ok(true),
        "off" | "false" | "0" | "no" => Ok(false),
        _ => Err(format!(":{name} expects on or off, got `{arg}`")),
    }
}

fn parse_number<T: std::str::FromStr>(name: &str, what: &str, arg: &str) -> Result<T, String> {
    arg.parse::<T>()
        .map_err(|_| format!(":{name} expects {what}, got `{arg}`"))
}

/// Parse a command line without its leading colon.
pub fn parse_command(line: &str) -> Result<Command, String> {
    let (name, arg) = match line.find(char::is_whitespace) {
        Some(i) => (&line[..i], line[i..].trim()),
        None => (line, ""),
    };
    let spec = spec(name).ok_or_else(|| {
        if name.is_empty() {
            "a command name is missing after `:` (try :help)".to_string()
        } else {
            format!("unknown command :{name} (try :help)")
        }
    })?;
    match spec.arg {
        ArgKind::None if !arg.is_empty() => return Err(format!(":{name} takes no argument")),
        ArgKind::File | ArgKind::Text | ArgKind::Word(_) | ArgKind::Number if arg.is_empty() => {
            return Err(format!(":{name} needs an argument: :{name} {}", spec.usage));
        }
        _ => {}
    }
    Ok(match name {
        "help" => Command::Help,
        "grammar" => Command::Grammar(PathBuf::from(arg)),
        "schema" => Command::Schema(PathBuf::from(arg)),
        "regex" => Command::Regex(arg.to_string()),
        "json" => Command::Json,
        "none" => Command::NoConstraint,
        "method" => Command::Method(parse_method(arg)?),
        "k" => Command::K(parse_lookahead(arg).map_err(|e| format!(":k: {e}"))?),
        "draft" => Command::Draft(parse_number(name, "a token count", arg)?),
        "temp" => {
            let t: f32 = parse_number(name, "a number", arg)?;
            if !t.is_finite() || t < 0.0 {
                return Err(format!(":temp expects a finite number >= 0, got `{arg}`"));
            }
            Command::Temp(t)
        }
        "seed" => Command::Seed(parse_number(name, "a non-negative integer", arg)?),
        "max" => {
            let n: usize = parse_number(name, "a token count", arg)?;
            if n == 0 {
                return Err(":max expects at least 1".into());
            }
            Command::Max(n)
        }
        "chat" => Command::Chat(parse_on_off(name, arg)?),
        "conversation" => Command::Conversation(parse_on_off(name, arg)?),
        "reset" => Command::Reset,
        "show" => Command::Show,
        "stats" => Command::Stats,
        "mask" => Command::Mask,
        "save" => Command::Save(PathBuf::from(arg)),
        "tokens" => Command::Tokens(parse_on_off(name, arg)?),
        "tools" => {
            let mut words = arg.split_whitespace();
            match (words.next(), words.next(), words.next()) {
                (Some("off"), None, _) => Command::Tools(None, String::new()),
                (Some(path), choice, None) => Command::Tools(
                    Some(PathBuf::from(path)),
                    choice.unwrap_or("auto").to_string(),
                ),
                _ => return Err(":tools FILE [auto|required|NAME] | off".into()),
            }
        }
        "quit" => Command::Quit,
        other => unreachable!("command table and parser disagree on :{other}"),
    })
}

/// The `:help` text, one line per command.
pub fn help_text() -> String {
    let width = COMMANDS
        .iter()
        .map(|c| c.name.len() + c.usage.len() + 2)
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    for c in COMMANDS {
        let head = if c.usage.is_empty() {
            format!(":{}", c.name)
        } else {
            format!(":{} {}", c.name, c.usage)
        };
        out.push_str(&format!("  {head:<width$}  {}\n", c.help, width = width));
    }
    out.push_str("  Anything else is a prompt. End a line with \\ to continue it; Ctrl-C stops a generation.\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_command_in_the_table_parses() {
        for c in COMMANDS {
            let line = match c.arg {
                ArgKind::None => c.name.to_string(),
                ArgKind::File | ArgKind::Text => format!("{} x", c.name),
                ArgKind::Word(words) => format!("{} {}", c.name, words[0]),
                ArgKind::Number => format!("{} 3", c.name),
            };
            assert!(parse_command(&line).is_ok(), ":{line} did not parse");
        }
    }

    #[test]
    fn prompts_and_commands_are_told_apart() {
        assert_eq!(parse_input("  \n "), Ok(Input::Empty));
        assert_eq!(
            parse_input("hello: world"),
            Ok(Input::Prompt("hello: world".into()))
        );
        assert_eq!(
            parse_input("\\:not a command"),
            Ok(Input::Prompt(":not a command".into()))
        );
        assert_eq!(parse_input(" :json"), Ok(Input::Command(Command::Json)));
        assert_eq!(
            parse_input(":schema grammars/gsm8k.schema.json"),
            Ok(Input::Command(Command::Schema(
                "grammars/gsm8k.schema.json".into()
            )))
        );
        // A regex keeps its inner spaces.
        assert_eq!(
            parse_input(":regex  a b+ "),
            Ok(Input::Command(Command::Regex("a b+".into())))
        );
    }

    #[test]
    fn arguments_are_checked() {
        assert_eq!(parse_command("k inf"), Ok(Command::K(None)));
        assert_eq!(parse_command("k 2"), Ok(Command::K(Some(2))));
        assert_eq!(
            parse_command("method NAIVE"),
            Ok(Command::Method(Method::Naive))
        );
        assert_eq!(parse_command("temp 0.7"), Ok(Command::Temp(0.7)));
        assert_eq!(parse_command("tokens on"), Ok(Command::Tokens(true)));
        assert_eq!(parse_command("chat off"), Ok(Command::Chat(false)));
        assert_eq!(
            parse_command("conversation on"),
            Ok(Command::Conversation(true))
        );
        assert_eq!(parse_command("reset"), Ok(Command::Reset));
        assert_eq!(
            parse_command("tools t.json required"),
            Ok(Command::Tools(Some("t.json".into()), "required".into()))
        );
        assert_eq!(
            parse_command("tools t.json"),
            Ok(Command::Tools(Some("t.json".into()), "auto".into()))
        );
        assert_eq!(
            parse_command("tools off"),
            Ok(Command::Tools(None, String::new()))
        );
        assert!(parse_command("tools a b c").is_err());
        assert!(parse_command("reset now").is_err());
        for bad in [
            "k -1",
            "temp -1",
            "temp nan",
            "max 0",
            "seed x",
            "chat maybe",
            "method fast",
            "json x",
            "grammar",
            "frobnicate",
            "",
        ] {
            let err = parse_command(bad).unwrap_err();
            assert!(!err.is_empty(), "{bad}");
        }
        assert!(parse_command("frobnicate").unwrap_err().contains(":help"));
        assert!(
            parse_command("grammar")
                .unwrap_err()
                .contains(":grammar FILE")
        );
    }

    #[test]
    fn help_lists_every_command_on_its_own_line() {
        let help = help_text();
        for c in COMMANDS {
            assert_eq!(
                help.lines()
                    .filter(|l| l.trim_start().starts_with(&format!(":{} ", c.name))
                        || l.trim() == format!(":{}", c.name))
                    .count(),
                1,
                "{}",
                c.name
            );
        }
    }
}
