//! Fuzzing the history readers: EDN (`history.edn`, `ledger.edn`, histories of other tools)
//! and JSON lines.
//!
//! `idem-jepsen check` reads files it did not write, so its readers must answer every input
//! with a value or an error, never a panic, a stack overflow or an allocation sized by the
//! input's claims. Two kinds of input: arbitrary text (weighted towards EDN's own
//! characters, so the parser gets past its first token), and structured mutations of the
//! real histories under `testdata/` (a slice deleted, repeated or replaced, delimiters
//! dropped or nested deep). Cases that once failed are kept in `proptest-regressions/`.

use idem_jepsen::history::edn;
use idem_jepsen::{History, Ledger};
use proptest::prelude::*;

/// Characters EDN gives meaning to, and a few that it does not.
const ALPHABET: &[char] = &[
    '(',
    ')',
    '[',
    ']',
    '{',
    '}',
    '#',
    '_',
    ':',
    '"',
    '\\',
    ';',
    ',',
    ' ',
    '\n',
    'u',
    'N',
    'M',
    '/',
    '.',
    '+',
    '-',
    'e',
    'E',
    '0',
    '1',
    '9',
    'a',
    'n',
    'i',
    'l',
    't',
    'r',
    'f',
    '\'',
    'é',
    '\u{1F600}',
    '\u{D7FF}',
    '\0',
];

/// The histories and ledgers the tests of this crate keep.
fn samples() -> Vec<String> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata");
    [
        "good/history.edn",
        "good/ledger.edn",
        "foreign/history.edn",
        "good-json/history.jsonl",
        "bad/lost-ack/history.edn",
    ]
    .iter()
    .map(|p| {
        let text = std::fs::read_to_string(root.join(p)).unwrap();
        // A prefix of whole lines keeps each case fast.
        text.lines().take(60).collect::<Vec<_>>().join("\n")
    })
    .collect()
}

fn edn_text() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(ALPHABET), 0..400)
        .prop_map(|chars| chars.into_iter().collect())
}

/// One edit of a text, at byte positions taken modulo its length (on char boundaries).
#[derive(Debug, Clone)]
enum Mutation {
    Delete(usize, usize),
    Repeat(usize, usize),
    Insert(usize, String),
    Nest(usize, usize),
    Truncate(usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 0..64usize).prop_map(|(at, len)| Mutation::Delete(at, len)),
        (any::<usize>(), 0..64usize).prop_map(|(at, len)| Mutation::Repeat(at, len)),
        (any::<usize>(), edn_text()).prop_map(|(at, text)| Mutation::Insert(at, text)),
        (any::<usize>(), 0..2000usize).prop_map(|(at, depth)| Mutation::Nest(at, depth)),
        any::<usize>().prop_map(Mutation::Truncate),
    ]
}

/// The char boundary at or before `at % (len + 1)`.
fn boundary(text: &str, at: usize) -> usize {
    let mut at = at % (text.len() + 1);
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

fn apply(text: &mut String, mutation: &Mutation) {
    match mutation {
        Mutation::Delete(at, len) => {
            let start = boundary(text, *at);
            let end = boundary(text, start.saturating_add(*len).min(text.len()));
            text.replace_range(start..end, "");
        }
        Mutation::Repeat(at, len) => {
            let start = boundary(text, *at);
            let end = boundary(text, start.saturating_add(*len).min(text.len()));
            let copy = text[start..end].to_string();
            text.insert_str(end, &copy);
        }
        Mutation::Insert(at, inserted) => {
            let at = boundary(text, *at);
            text.insert_str(at, inserted);
        }
        Mutation::Nest(at, depth) => {
            let at = boundary(text, *at);
            let open = "[#_#t{".repeat(*depth / 6 + 1);
            text.insert_str(at, &open[..*depth % open.len()]);
        }
        Mutation::Truncate(at) => {
            let at = boundary(text, *at);
            text.truncate(at);
        }
    }
}

/// Every reader of this crate on `text`: any answer but a panic is fine.
fn read_everything(text: &str) {
    let _ = edn::parse_all(text);
    let _ = edn::parse_one(text);
    let _ = History::parse(text);
    let _ = Ledger::parse(text);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn arbitrary_text_never_panics(text in edn_text()) {
        read_everything(&text);
    }

    #[test]
    fn arbitrary_unicode_never_panics(text in any::<String>()) {
        read_everything(&text);
    }

    #[test]
    fn mutated_histories_never_panic(
        sample in 0..5usize,
        mutations in prop::collection::vec(mutation(), 1..6),
    ) {
        let mut text = samples()[sample].clone();
        for m in &mutations {
            apply(&mut text, m);
        }
        read_everything(&text);
    }

    #[test]
    fn written_values_read_back(sample in 0..5usize) {
        // The writer's output is the reader's input: every form of a sample survives a
        // write and a read unchanged.
        let forms = match edn::parse_all(&samples()[sample]) {
            Ok(forms) => forms,
            Err(_) => return Ok(()), // the JSON sample
        };
        for form in forms {
            let mut text = String::new();
            edn::write_value(&mut text, &form).unwrap();
            prop_assert_eq!(edn::parse_one(&text).unwrap(), form);
        }
    }
}

#[test]
fn deep_nesting_is_an_error_not_a_stack_overflow() {
    for open in ["[", "(", "{", "#{", "#_", "#tag ", "#:ns{"] {
        let text = open.repeat(100_000);
        assert!(edn::parse_all(&text).is_err(), "{open}");
        assert!(History::parse(&text).is_err(), "{open}");
    }
}
