//! Every grammar shipped in `grammars/` parses, lowers, and accepts its hand-written example
//! `grammars/examples/<name>.txt` in the reference recognizer; a truncated example is a viable
//! prefix but (for these grammars) not a sentence.

mod common;

use domino_engine::grammar::reference::ReferenceRecognizer;
use domino_engine::grammar::{CompileOptions, GrammarSource};

#[test]
fn shipped_grammars_accept_their_examples() {
    let dir = common::workspace_root().join("grammars");
    let mut checked = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let Some(stem) = name
            .strip_suffix(".gbnf")
            .or_else(|| name.strip_suffix(".lark"))
        else {
            continue;
        };
        let source = GrammarSource::from_path(&path).unwrap();
        let grammar = source
            .compile(&CompileOptions::default())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let rec = ReferenceRecognizer::new(&grammar).unwrap();
        let example_path = dir.join("examples").join(format!("{stem}.txt"));
        let example = std::fs::read(&example_path)
            .unwrap_or_else(|e| panic!("{}: {e}", example_path.display()));
        assert!(
            rec.accepts(&example),
            "{name} rejects {}",
            example_path.display()
        );
        let cut = &example[..example.len() * 2 / 3];
        assert!(rec.is_viable_prefix(cut), "{name}: prefix should be viable");
        checked.push(stem.to_string());
    }
    checked.sort();
    assert_eq!(
        checked,
        [
            "arithmetic",
            "c",
            "csv_row",
            "gsm8k",
            "json",
            "list_of_strings",
            "rpg_template",
            "xml_person"
        ]
    );
}

#[test]
fn shipped_grammars_reject_broken_text() {
    let dir = common::workspace_root().join("grammars");
    let cases: &[(&str, &str)] = &[
        ("json.gbnf", "{\"a\": }"),
        ("gsm8k.gbnf", "{\"thoughts\": [], \"answer\": 1}"),
        ("c.gbnf", "int main() { return 0 }"),
        ("xml_person.gbnf", "<person><name>x</name></person>"),
        ("rpg_template.lark", "{\"id\": 1}"),
        ("arithmetic.gbnf", "1 + * 2"),
        ("csv_row.gbnf", "a,\"b\n"),
        ("list_of_strings.gbnf", "[\"a\" \"b\"]"),
    ];
    for (file, text) in cases {
        let g = GrammarSource::from_path(&dir.join(file))
            .unwrap()
            .compile(&CompileOptions::default())
            .unwrap();
        assert!(
            !ReferenceRecognizer::new(&g)
                .unwrap()
                .accepts(text.as_bytes()),
            "{file} accepts {text:?}"
        );
    }
}
