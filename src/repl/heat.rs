//! Token heat: how the REPL paints generated tokens (the paper's Fig. 1/2).
//!
//! Each token gets a background hue from its surprise under the *unmasked* model: the
//! token's log-perplexity `-log p(token)` (natural log), mapped linearly from green
//! (`p = 1`) through yellow to red at [`HOT_NATS`] nats and above (p ≤ e⁻⁵ ≈ 0.7%). The scale is
//! logarithmic in the perplexity `1/p` because perplexities span orders of magnitude; a token
//! the grammar forced against the model's will (a low-probability token) therefore glows red.
//! Tokens where the grammar *intervened* (the model's most likely token was not allowed) are
//! underlined. With token boundaries on (`:tokens on`) a thin separator is drawn between tokens
//! and a newline inside a token is shown as `↵`.
//!
//! Colour is chosen once per session ([`Palette`]): off when `NO_COLOR` is set (non-empty) or
//! stdout is not a terminal, 24-bit when `COLORTERM` says so, otherwise the xterm 256-colour
//! cube. Without colour the text is printed as is (boundaries, when on, as `|`). Rendering is
//! pure string building so it can be tested without a terminal.

use crossterm::style::{Color, Stylize};

/// Surprise (in nats) at which the heat saturates at red.
pub const HOT_NATS: f32 = 5.0;

/// How colour is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Palette {
    /// No escape sequences at all.
    Plain,
    /// xterm 256-colour cube.
    Ansi256,
    /// 24-bit RGB.
    TrueColor,
}

impl Palette {
    /// The palette for this process: `Plain` unless stdout is a terminal and `NO_COLOR` is
    /// unset or empty (<https://no-color.org>).
    pub fn detect(stdout_is_terminal: bool) -> Palette {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        if no_color || !stdout_is_terminal {
            return Palette::Plain;
        }
        match std::env::var("COLORTERM").map(|v| v.to_ascii_lowercase()) {
            Ok(v) if v == "truecolor" || v == "24bit" => Palette::TrueColor,
            _ => Palette::Ansi256,
        }
    }

    pub fn is_plain(self) -> bool {
        self == Palette::Plain
    }
}

/// Heat in `[0, 1]` of a token with natural-log probability `logprob` under the unmasked model.
pub fn heat(logprob: f32) -> f32 {
    if logprob.is_nan() {
        return 1.0;
    }
    (-logprob / HOT_NATS).clamp(0.0, 1.0)
}

/// Background colour for a heat value: hue 120° (green) → 0° (red), dark enough that light
/// text stays readable on it.
pub fn heat_rgb(h: f32) -> (u8, u8, u8) {
    hsv_to_rgb(120.0 * (1.0 - h.clamp(0.0, 1.0)), 0.75, 0.5)
}

fn hsv_to_rgb(hue: f32, s: f32, v: f32) -> (u8, u8, u8) {
    let c = v * s;
    let hp = hue / 60.0;
    let x = c * (1.0 - (hp % 2.0 - 1.0).abs());
    let (r, g, b) = match hp as u32 {
        0 => (c, x, 0.0),
        1 => (x, c, 0.0),
        2 => (0.0, c, x),
        3 => (0.0, x, c),
        4 => (x, 0.0, c),
        _ => (c, 0.0, x),
    };
    let m = v - c;
    let to = |f: f32| ((f + m) * 255.0).round().clamp(0.0, 255.0) as u8;
    (to(r), to(g), to(b))
}

/// The nearest colour of the xterm 256-colour cube (indices 16..=231).
pub fn ansi256(rgb: (u8, u8, u8)) -> u8 {
    const LEVELS: [u8; 6] = [0, 95, 135, 175, 215, 255];
    let nearest = |c: u8| {
        LEVELS
            .iter()
            .enumerate()
            .min_by_key(|(_, l)| (c as i32 - **l as i32).abs())
            .map(|(i, _)| i as u8)
            .unwrap_or(0)
    };
    16 + 36 * nearest(rgb.0) + 6 * nearest(rgb.1) + nearest(rgb.2)
}

/// How tokens are drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeatStyle {
    pub palette: Palette,
    /// Draw token boundaries (`:tokens on`).
    pub boundaries: bool,
}

/// One rendered token's facts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TokenView<'a> {
    /// The token's text (may be empty while a UTF-8 character is split across tokens).
    pub text: &'a str,
    /// Log-probability under the unmasked model.
    pub logprob: f32,
    /// The grammar blocked the model's most likely token here.
    pub intervened: bool,
    /// This is not the first token of the output (a boundary precedes it).
    pub follows_token: bool,
}

impl HeatStyle {
    fn color(&self, rgb: (u8, u8, u8)) -> Color {
        match self.palette {
            Palette::TrueColor => Color::Rgb {
                r: rgb.0,
                g: rgb.1,
                b: rgb.2,
            },
            _ => Color::AnsiValue(ansi256(rgb)),
        }
    }

    /// Append the rendering of one token to `out`.
    pub fn render(&self, token: &TokenView<'_>, out: &mut String) {
        use std::fmt::Write;
        if self.boundaries && token.follows_token {
            if self.palette.is_plain() {
                out.push('|');
            } else {
                let _ = write!(out, "{}", "│".dark_grey());
            }
        }
        let shown: std::borrow::Cow<'_, str> = if self.boundaries && token.text.contains('\n') {
            token.text.replace('\n', "↵\n").into()
        } else {
            token.text.into()
        };
        if self.palette.is_plain() {
            out.push_str(&shown);
            return;
        }
        let bg = self.color(heat_rgb(heat(token.logprob)));
        let fg = self.color((240, 240, 240));
        // Paint line by line: a background colour carried across a newline would fill the
        // rest of the terminal row.
        for (i, segment) in shown.split('\n').enumerate() {
            if i > 0 {
                out.push('\n');
            }
            if segment.is_empty() {
                continue;
            }
            let styled = segment.with(fg).on(bg);
            let _ = if token.intervened {
                write!(out, "{}", styled.underlined())
            } else {
                write!(out, "{styled}")
            };
        }
    }
}

/// A one-line legend for the heat colours (empty when plain).
pub fn legend(palette: Palette) -> String {
    if palette.is_plain() {
        return String::new();
    }
    let style = HeatStyle {
        palette,
        boundaries: false,
    };
    let mut out = String::from("heat: ");
    for (label, lp) in [
        ("likely", -0.05f32),
        ("", -1.25),
        ("", -2.5),
        ("", -3.75),
        ("surprising", -5.0),
    ] {
        let text = if label.is_empty() {
            "  ".to_string()
        } else {
            format!(" {label} ")
        };
        style.render(
            &TokenView {
                text: &text,
                logprob: lp,
                intervened: false,
                follows_token: false,
            },
            &mut out,
        );
    }
    out.push_str("  ");
    style.render(
        &TokenView {
            text: "grammar intervened",
            logprob: -0.05,
            intervened: true,
            follows_token: false,
        },
        &mut out,
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(text: &str, logprob: f32, intervened: bool, follows_token: bool) -> TokenView<'_> {
        TokenView {
            text,
            logprob,
            intervened,
            follows_token,
        }
    }

    #[test]
    fn heat_grows_with_surprise_and_saturates() {
        assert_eq!(heat(0.0), 0.0);
        assert!(heat(-1.0) < heat(-2.0));
        assert_eq!(heat(-HOT_NATS), 1.0);
        assert_eq!(heat(-100.0), 1.0);
        assert_eq!(heat(f32::NEG_INFINITY), 1.0);
        assert_eq!(heat(f32::NAN), 1.0);
        // Green at p = 1, red when saturated.
        let (r, g, _) = heat_rgb(0.0);
        assert!(g > r);
        let (r, g, _) = heat_rgb(1.0);
        assert!(r > g);
    }

    #[test]
    fn ansi_cube_maps_extremes() {
        assert_eq!(ansi256((0, 0, 0)), 16);
        assert_eq!(ansi256((255, 255, 255)), 231);
        assert_eq!(ansi256((255, 0, 0)), 196);
    }

    #[test]
    fn plain_rendering_is_the_text() {
        let style = HeatStyle {
            palette: Palette::Plain,
            boundaries: false,
        };
        let mut out = String::new();
        style.render(&view("{\"a", -3.0, true, false), &mut out);
        style.render(&view("\":\n1", -0.1, false, true), &mut out);
        assert_eq!(out, "{\"a\":\n1");
        let style = HeatStyle {
            palette: Palette::Plain,
            boundaries: true,
        };
        let mut out = String::new();
        style.render(&view("a", 0.0, false, false), &mut out);
        style.render(&view("b\n", 0.0, false, true), &mut out);
        assert_eq!(out, "a|b↵\n");
    }

    #[test]
    fn colour_rendering_paints_and_underlines() {
        let style = HeatStyle {
            palette: Palette::TrueColor,
            boundaries: false,
        };
        let mut calm = String::new();
        style.render(&view("x", -0.01, false, false), &mut calm);
        let mut hot = String::new();
        style.render(&view("x", -9.0, true, false), &mut hot);
        assert!(calm.contains("\x1b["), "{calm:?}");
        assert_ne!(calm, hot);
        // SGR 4 = underline, only on the intervened token.
        assert!(hot.contains("\x1b[4m"), "{hot:?}");
        assert!(!calm.contains("\x1b[4m"), "{calm:?}");
        // A newline is never inside a coloured span.
        let mut multi = String::new();
        style.render(&view("a\nb", -1.0, false, false), &mut multi);
        let newline = multi.find('\n').unwrap();
        let before = &multi[..newline];
        let painted = before.rfind("\x1b[48;").unwrap();
        assert!(
            before[painted..].contains("\x1b[49m") || before[painted..].contains("\x1b[0m"),
            "{multi:?}"
        );
    }
}
