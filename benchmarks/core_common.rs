//! What the core's benchmark examples (`core_encode`, `core_batch`) share: their
//! arguments' encoder and corpus, and the corpus cut into documents as
//! `bench_gigatoken.py` cuts it.

use bytepair::bpe::Encoder;
use bytepair::io::tiktoken::load;
use bytepair::pretok::{CL100K_PATTERN, GPT2_PATTERN, O200K_PATTERN};

/// The encoder of `RANKS.tiktoken` with the built-in pattern named `pattern`.
pub fn encoder(ranks_path: &str, pattern: &str) -> Encoder {
    let pattern = match pattern {
        "gpt2" => GPT2_PATTERN,
        "cl100k" => CL100K_PATTERN,
        "o200k" => O200K_PATTERN,
        other => panic!("no built-in pattern {other:?}"),
    };
    let ranks = std::fs::read(ranks_path).expect("the .tiktoken file");
    let Ok((encoder, _)) = load(&ranks, &[], Some(pattern)) else {
        panic!("{ranks_path} does not load")
    };
    encoder
}

/// The first `mb` MB of the corpus at `path` (cut back to a character boundary).
pub fn corpus(path: &str, mb: usize) -> String {
    let mut bytes = std::fs::read(path).expect("the corpus");
    let mut cut = bytes.len().min(mb * 1_000_000);
    while cut < bytes.len() && (bytes[cut] & 0xC0) == 0x80 {
        cut -= 1;
    }
    bytes.truncate(cut);
    String::from_utf8(bytes).expect("UTF-8")
}

/// The documents between `<|endoftext|>` separators, or else 50 equal slices.
pub fn documents(text: &str) -> Vec<&str> {
    if text.contains("<|endoftext|>") {
        return text
            .split("<|endoftext|>")
            .filter(|d| !d.is_empty())
            .collect();
    }
    let step = text.len() / 50 + 1;
    let mut slices = Vec::new();
    let mut i = 0;
    while i < text.len() {
        let mut j = (i + step).min(text.len());
        while !text.is_char_boundary(j) {
            j += 1;
        }
        slices.push(&text[i..j]);
        i = j;
    }
    slices
}
