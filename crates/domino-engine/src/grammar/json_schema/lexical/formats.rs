//! `format`: the regexes (over the decoded string) of the formats compiled to grammars, each
//! a conservative subset of what the `jsonschema` crate accepts for it, and the list of
//! formats that crate asserts (the others are annotations).

/// Formats the `jsonschema` crate asserts. Those with a pattern here are compiled; the rest
/// are reported unsupported. Any other format name is an annotation (constrains nothing).
pub const ASSERTED_FORMATS: &[&str] = &[
    "date",
    "date-time",
    "time",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "uri-template",
    "json-pointer",
    "relative-json-pointer",
    "regex",
    "uuid",
    "duration",
];

/// The regex (over the decoded string, all ASCII) for a supported format.
pub fn format_pattern(format: &str) -> Option<String> {
    // RFC 3339 `full-date`: day ranges per month, 29 February in leap years only (every
    // fourth year, centuries only when divisible by 400).
    let leap = "(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)-02-29";
    let date = format!(
        "(?:[0-9]{{4}}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-8]))|{leap})"
    );
    // RFC 3339 `full-time`, `Z` in either case; a leap second (`:60`) only at 23:59 UTC.
    let frac = "(?:\\.[0-9]{1,9})?";
    let time = format!(
        "(?:(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]{frac}(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])|23:59:60{frac}[Zz])"
    );
    // RFC 1123 labels: letters, digits and inner hyphens, 1 to `max` characters, never `--`
    // in the third and fourth places (IDNA reserves those; `xn--` labels are left out).
    let label = |max: usize| {
        format!(
            "(?:{a}|{a}[A-Za-z0-9-]?{a}|{a}[A-Za-z0-9-]{{2}}{a}|{a}[A-Za-z0-9-](?:{a}[A-Za-z0-9-]|-{a})[A-Za-z0-9-]{{0,{}}}{a})",
            max - 5,
            a = "[A-Za-z0-9]"
        )
    };
    // At most 253 characters in all: up to 3 labels of up to 63, or up to 9 of up to 27.
    let hostname = format!(
        "(?:{l63}(?:\\.{l63}){{0,2}}|{l27}(?:\\.{l27}){{3,8}})",
        l63 = label(63),
        l27 = label(27)
    );
    let h16 = "[0-9a-fA-F]{1,4}";
    let octet = "(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])";
    let pchar = "(?:[A-Za-z0-9._~!$&'()*+,;=:@-]|%[0-9A-Fa-f]{2})";
    Some(match format {
        "date" => date,
        "time" => time,
        "date-time" => format!("{date}[Tt]{time}"),
        "uuid" => "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}".to_string(),
        "ipv4" => format!("{octet}(?:\\.{octet}){{3}}"),
        "ipv6" => [
            format!("(?:{h16}:){{7}}{h16}"),
            format!("(?:{h16}:){{1,7}}:"),
            format!("(?:{h16}:){{1,6}}:{h16}"),
            format!("(?:{h16}:){{1,5}}(?::{h16}){{1,2}}"),
            format!("(?:{h16}:){{1,4}}(?::{h16}){{1,3}}"),
            format!("(?:{h16}:){{1,3}}(?::{h16}){{1,4}}"),
            format!("(?:{h16}:){{1,2}}(?::{h16}){{1,5}}"),
            format!("{h16}:(?::{h16}){{1,6}}"),
            format!(":(?:(?::{h16}){{1,7}}|:)"),
        ]
        .join("|"),
        "hostname" => hostname,
        // Conservative: dot-separated atoms, then alphanumeric labels (single inner hyphens)
        // and an alphabetic top-level label.
        // Every address this writes is also a valid internationalized address (RFC 6531
        // extends RFC 5321), so `idn-email` shares the conservative ASCII subset.
        // A local part is dot-separated atoms or (RFC 5321 `Quoted-string`) printable ASCII
        // in quotes, with `\\\\` and `\\"` as quoted pairs.
        // No `<` or `>` in a quoted local part: the `jsonschema` crate's check reads
        // `" <…` as a display name and rejects it (found by the bench sample test).
        "email" | "idn-email" => "(?:[A-Za-z0-9_+-]{1,32}(?:\\.[A-Za-z0-9_+-]{1,32}){0,4}|\"(?:[ !#-;=?-\\[\\]-~]|\\\\[\\\\\"]){1,32}\")@(?:[A-Za-z0-9]{1,20}(?:-[A-Za-z0-9]{1,20}){0,3}\\.){1,4}[A-Za-z]{2,8}".to_string(),
        "uri" => format!(
            "[A-Za-z][A-Za-z0-9+.-]{{0,15}}:(?://(?:[A-Za-z0-9._~-]|%[0-9A-Fa-f]{{2}})+(?::[0-9]{{1,5}})?(?:/{pchar}*)*|(?:/{pchar}+)(?:/{pchar}*)*|{pchar}+(?:/{pchar}*)*)?(?:\\?(?:{pchar}|[/?])*)?(?:#(?:{pchar}|[/?])*)?"
        ),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::super::full;
    use super::*;

    #[test]
    fn formats_parse_and_match_examples() {
        for (f, ok, bad) in [
            ("date", "2024-02-28", "2024-02-30"),
            (
                "date-time",
                "2024-01-31T23:59:59.5+01:00",
                "2024-01-31 23:59:59",
            ),
            ("time", "12:00:00Z", "24:00:00Z"),
            ("uuid", "123e4567-e89b-12d3-a456-426614174000", "123e4567"),
            ("ipv4", "192.168.0.255", "256.1.1.1"),
            ("ipv6", "2001:db8::1", "2001:db8:::1"),
            ("email", "a.b@example.com", "a@b"),
            ("uri", "https://example.com:8080/a/b?x=1#f", "no scheme"),
        ] {
            let re = full(&format_pattern(f).unwrap());
            assert!(re.is_match(ok), "{f} {ok}");
            assert!(!re.is_match(bad), "{f} {bad}");
        }
    }
}
