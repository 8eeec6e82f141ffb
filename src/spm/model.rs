//! A loaded SentencePiece BPE model: the vocabulary as lookup tables, checked
//! the way sentencepiece checks it when it loads a `.model`
//! (`ModelInterface::InitializePieces`), plus its normalizers.
//!
//! Two id maps, as in sentencepiece: pieces merges may produce (NORMAL,
//! USER_DEFINED, UNUSED) and the reserved ones (UNKNOWN, CONTROL, BYTE), which
//! only appear by id. A string found in both maps is reserved first.

use rustc_hash::{FxHashMap, FxHashSet};

use crate::cache_pool::CachePool;
use crate::model::Frame;

use super::chars::CharTable;
use super::encode::WordCache;
use super::hf_decode::HfDecoder;
use super::normalizer::{Normalizer, PrefixMatcher, SPACE_SYMBOL};
use super::proto::{ModelProto, PieceType, BPE, CHAR, UNIGRAM, WORD};
use super::SpmError;

/// One vocabulary entry.
#[derive(Debug, Clone)]
pub struct Entry {
    pub piece: String,
    pub score: f32,
    pub kind: PieceType,
}

#[derive(Debug)]
pub struct SpmModel {
    pub proto: ModelProto,
    pub entries: Vec<Entry>,
    /// NORMAL, USER_DEFINED and UNUSED pieces: what merges can produce.
    pub mergeable: FxHashMap<String, u32>,
    /// UNKNOWN, CONTROL and BYTE pieces.
    pub reserved: FxHashMap<String, u32>,
    pub unk_id: u32,
    /// `<s>` and `</s>` when they are control pieces (else sentencepiece has none).
    pub bos_id: Option<u32>,
    pub eos_id: Option<u32>,
    /// With byte fallback, the id of `<0xNN>` for each byte.
    pub byte_ids: Option<Box<[u32; 256]>>,
    pub user_defined: Option<PrefixMatcher>,
    pub normalizer: Normalizer,
    pub denormalizer: Option<Normalizer>,
    pub has_unused: bool,
    /// Whether the normalizer has rules (a precompiled charsmap), which can lengthen text.
    pub has_charsmap: bool,
    /// Every two characters that stand next to each other inside some
    /// mergeable piece ([`char_pair_key`]): between any other two, no merge
    /// can ever join the text, so it can be merged in separate parts.
    pub joined: FxHashSet<u64>,
    /// The whitespace mark of normalized text: `▁`, or " " when not escaped.
    pub space: char,
    /// What decode writes for `<unk>`, and the normalizer settings it undoes.
    pub unk_surface: String,
    pub add_dummy_prefix: bool,
    pub remove_extra_whitespaces: bool,
    /// (left id, right id) -> the id and score of their concatenation, for
    /// every way of cutting a mergeable piece into two mergeable pieces: the
    /// merge loop's lookup without hashing strings.
    pub pairs: PairTable,
    /// Per id: a NORMAL piece that no reserved piece shadows, so a final symbol
    /// of it is its own id (dense, unlike `entries`, whose lines a word's every
    /// symbol would miss on).
    pub emits_itself: Vec<bool>,
    /// Each character's mergeable id, and where it stands in pieces: next to
    /// the whitespace mark (the only places where a merge can cross a word
    /// boundary), or to other characters.
    pub chars: CharTable,
    /// Whether a USER_DEFINED piece holds a space or `▁` (a word cut could fall
    /// inside it: [`SpmModel::cuts_words`]).
    pub user_defined_spaces: bool,
    /// Whether some string is both a reserved and a mergeable piece (then
    /// `piece_to_id` answers the reserved id for it, and encode must ask).
    pub reserved_shadows_mergeable: bool,
    /// Warm word caches for encoding.
    pub caches: CachePool<WordCache>,
    /// Which texts between special tokens get the dummy prefix (see [`Prefix`]).
    pub prefix: Prefix,
    /// Hugging Face's Metaspace `split: true`: every `▁` starts a word of its own,
    /// and no merge crosses into it (see [`SpmModel::with_metaspace`]).
    pub split: bool,
    /// Added tokens Hugging Face matches in the normalized text ([`Prefix::Each`]
    /// files whose tokens say `normalized: true`; see `seam`).
    pub normalized_tokens: Vec<String>,
    /// A `tokenizer.json`'s decoder, which decodes as `tokenizers` does; `None`:
    /// sentencepiece's decode.
    pub hf_decoder: Option<HfDecoder>,
}

/// Which segments of a text (the parts between the special tokens found in it)
/// get the dummy prefix "▁", when the normalizer adds one.
///
/// sentencepiece itself matches no special tokens, so a `.model` follows
/// [`Prefix::Spm`]; a Hugging Face `tokenizer.json` follows its own
/// components, as `tokenizers` applies them per segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prefix {
    /// The segment at the start of the text, always (`" a"` is `▁▁a`).
    Spm,
    /// Metaspace `prepend_scheme: "first"`: the segment at the start of the text,
    /// unless it starts with a space or `▁` (`" a"` is `▁a`).
    First,
    /// Metaspace `prepend_scheme: "always"`: every segment, unless it starts with
    /// a space or `▁`.
    Always,
    /// The legacy `Prepend("▁")` normalizer (Llama 2): every segment, always.
    Each,
}

impl Prefix {
    /// Whether `segment` (at the start of the text when `first`) gets the prefix.
    #[inline]
    pub fn applies(self, segment: &str, first: bool) -> bool {
        let spaced = || segment.starts_with([' ', '\u{2581}']);
        match self {
            Prefix::Spm => first,
            Prefix::First => first && !spaced(),
            Prefix::Always => !spaced(),
            Prefix::Each => true,
        }
    }

    /// The scheme's name, as `tokenizer.json` and the Python binding spell it.
    pub fn name(self) -> &'static str {
        match self {
            Prefix::Spm => "spm",
            Prefix::First => "first",
            Prefix::Always => "always",
            Prefix::Each => "each",
        }
    }

    pub fn from_name(name: &str) -> Option<Prefix> {
        [Prefix::Spm, Prefix::First, Prefix::Always, Prefix::Each]
            .into_iter()
            .find(|p| p.name() == name)
    }
}

/// `<0xNN>` (two upper-case hex digits) -> the byte, as sentencepiece spells it.
pub fn byte_of_piece(piece: &str) -> Option<u8> {
    let hex = piece.strip_prefix("<0x")?.strip_suffix('>')?;
    let ok = hex.len() == 2
        && hex
            .bytes()
            .all(|c| c.is_ascii_digit() || (b'A'..=b'F').contains(&c));
    ok.then(|| u8::from_str_radix(hex, 16).unwrap())
}

fn check_model_type(model_type: i32) -> Result<(), SpmError> {
    let unsupported = |what: &str| {
        SpmError::Unsupported(format!(
            "{what} models are not supported: bytepair encodes SentencePiece BPE models \
             (model_type=BPE) only"
        ))
    };
    match model_type {
        BPE => Ok(()),
        UNIGRAM => Err(unsupported("Unigram")),
        WORD => Err(unsupported("word")),
        CHAR => Err(unsupported("char")),
        t => Err(SpmError::Invalid(format!("unknown model_type {t}"))),
    }
}

impl SpmModel {
    /// Parses and checks a serialized `.model`.
    /// An empty file parses as a model with every field at its default (a Unigram
    /// model without pieces): it is refused as empty, not as a Unigram model.
    pub fn from_bytes(data: &[u8]) -> Result<SpmModel, SpmError> {
        if data.is_empty() {
            return Err(SpmError::Invalid(
                "the file is empty: not a SentencePiece model".into(),
            ));
        }
        SpmModel::from_proto(ModelProto::parse(data)?)
    }

    pub fn from_proto(proto: ModelProto) -> Result<SpmModel, SpmError> {
        if proto.pieces.is_empty() {
            return Err(SpmError::Invalid(
                "no pieces: not a SentencePiece model (or an empty one)".into(),
            ));
        }
        let trainer = proto.trainer();
        check_model_type(trainer.model_type())?;
        let byte_fallback = trainer.byte_fallback();
        let (entries, mergeable, reserved) = index_pieces(&proto)?;
        let unk = entries.iter().position(|e| e.kind == PieceType::Unknown);
        let unk_id =
            unk.ok_or_else(|| SpmError::Invalid("the model has no unknown piece".into()))?;
        let byte_ids = if byte_fallback {
            Some(byte_ids(&entries, &reserved)?)
        } else {
            None
        };
        let control = |piece: &str| {
            let id = *reserved.get(piece)?;
            (entries[id as usize].kind == PieceType::Control).then_some(id)
        };
        let user: Vec<&str> = entries
            .iter()
            .filter(|e| e.kind == PieceType::UserDefined)
            .map(|e| e.piece.as_str())
            .collect();
        let user_defined = PrefixMatcher::new(&user);
        let user_defined_spaces = user.iter().any(|p| p.contains([' ', '\u{2581}']));
        let suffix = trainer.treat_whitespace_as_suffix();
        let spec = proto.normalizer_spec.clone().unwrap_or_default();
        let normalizer =
            Normalizer::new(&spec, suffix, user_defined.clone()).map_err(SpmError::Invalid)?;
        let denormalizer = match &proto.denormalizer_spec {
            Some(spec) if !spec.precompiled_charsmap().is_empty() => {
                Some(Normalizer::new(spec, false, None).map_err(SpmError::Invalid)?)
            }
            _ => None,
        };
        let space = if spec.escape_whitespaces() {
            SPACE_SYMBOL.chars().next().unwrap()
        } else {
            ' '
        };
        let joined = mergeable
            .keys()
            .flat_map(|p| p.chars().zip(p.chars().skip(1)))
            .map(|(a, b)| char_pair_key(a, b))
            .collect();
        let pairs = pair_table(&mergeable, &entries);
        let chars = CharTable::new(&mergeable, space);
        let reserved_shadows_mergeable = reserved.keys().any(|p| mergeable.contains_key(p));
        let emits_itself = entries
            .iter()
            .map(|e| e.kind == PieceType::Normal && !reserved_shadows_mergeable)
            .collect();
        Ok(SpmModel {
            reserved_shadows_mergeable,
            emits_itself,
            chars,
            pairs,
            has_unused: entries.iter().any(|e| e.kind == PieceType::Unused),
            has_charsmap: !spec.precompiled_charsmap().is_empty(),
            bos_id: control(trainer.bos_piece()),
            eos_id: control(trainer.eos_piece()),
            unk_id: unk_id as u32,
            entries,
            mergeable,
            reserved,
            byte_ids,
            user_defined,
            user_defined_spaces,
            normalizer,
            denormalizer,
            joined,
            space,
            unk_surface: trainer.unk_surface().to_string(),
            add_dummy_prefix: spec.add_dummy_prefix(),
            remove_extra_whitespaces: spec.remove_extra_whitespaces(),
            caches: CachePool::default(),
            prefix: Prefix::Spm,
            split: false,
            normalized_tokens: Vec::new(),
            hf_decoder: None,
            proto,
        })
    }

    /// The frame of sentencepiece's `add_bos` / `add_eos`: `<s>` before / `</s>`
    /// after every text; an error when the model has no such control piece.
    pub fn frame(&self, add_bos: bool, add_eos: bool) -> Result<Frame, SpmError> {
        let id = |add: bool, id: Option<u32>, name: &str| match (add, id) {
            (false, _) => Ok(Vec::new()),
            (true, Some(id)) => Ok(vec![id]),
            (true, None) => Err(super::encode::no_control(name)),
        };
        Ok(Frame {
            before: id(add_bos, self.bos_id, "<s> (bos)")?,
            after: id(add_eos, self.eos_id, "</s> (eos)")?,
        })
    }

    /// The model with Hugging Face's rules for the dummy prefix and words
    /// ([`Prefix`], Metaspace `split`), as a `tokenizer.json` states them; an
    /// error for what cannot be exact (`split` with UNUSED pieces, which are
    /// resolved per text).
    pub fn with_metaspace(mut self, prefix: Prefix, split: bool) -> Result<SpmModel, SpmError> {
        if split && self.has_unused {
            return Err(SpmError::Unsupported(
                "Metaspace split true with UNUSED pieces is not supported".into(),
            ));
        }
        (self.prefix, self.split) = (prefix, split);
        Ok(self)
    }

    /// The model matching `tokens` as Hugging Face matches `normalized` added
    /// tokens under the legacy `Prepend("▁")` normalizer (see `seam`); an error
    /// for other prefix schemes, or a token holding a space or `▁`.
    pub fn with_normalized_tokens(mut self, tokens: Vec<String>) -> Result<SpmModel, SpmError> {
        if tokens.is_empty() {
            return Ok(self);
        }
        if self.prefix != Prefix::Each {
            return Err(SpmError::Unsupported(
                "normalized added tokens are only supported with the Prepend normalizer".into(),
            ));
        }
        if let Some(t) = tokens
            .iter()
            .find(|t| t.is_empty() || t.contains([' ', '\u{2581}']))
        {
            return Err(SpmError::Unsupported(format!(
                "normalized added token {t:?} is empty or holds a space or '\u{2581}': not supported"
            )));
        }
        self.normalized_tokens = tokens;
        Ok(self)
    }

    /// The CONTROL pieces, in id order: the model's special tokens.
    pub fn control_pieces(&self) -> Vec<String> {
        let entries = self.entries.iter();
        let controls = entries.filter(|e| e.kind == PieceType::Control);
        controls.map(|e| e.piece.clone()).collect()
    }

    /// sentencepiece's `PieceToId`: reserved pieces first, then mergeable ones,
    /// else the unknown id.
    pub fn piece_to_id(&self, piece: &str) -> u32 {
        let found = self
            .reserved
            .get(piece)
            .or_else(|| self.mergeable.get(piece));
        found.copied().unwrap_or(self.unk_id)
    }

    pub fn kind(&self, id: u32) -> PieceType {
        self.entries[id as usize].kind
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

type Indexed = (Vec<Entry>, FxHashMap<String, u32>, FxHashMap<String, u32>);

/// Builds the two id maps, refusing what sentencepiece refuses: empty pieces,
/// a piece defined twice, two unknown pieces, byte pieces without byte fallback.
fn index_pieces(proto: &ModelProto) -> Result<Indexed, SpmError> {
    let byte_fallback = proto.trainer().byte_fallback();
    let (mut mergeable, mut reserved) = (FxHashMap::default(), FxHashMap::default());
    let mut entries = Vec::with_capacity(proto.pieces.len());
    let mut unk_seen = false;
    for (id, p) in proto.pieces.iter().enumerate() {
        let kind = p.kind();
        let invalid = |why: String| SpmError::Invalid(format!("piece {id} ({:?}): {why}", p.piece));
        if p.piece.is_empty() {
            return Err(invalid("a piece must not be empty".into()));
        }
        let map = match kind {
            PieceType::Normal | PieceType::UserDefined | PieceType::Unused => &mut mergeable,
            _ => &mut reserved,
        };
        if map.insert(p.piece.clone(), id as u32).is_some() {
            return Err(invalid("defined twice".into()));
        }
        if kind == PieceType::Unknown && std::mem::replace(&mut unk_seen, true) {
            return Err(invalid("a second unknown piece".into()));
        }
        if kind == PieceType::Byte && !byte_fallback {
            return Err(invalid(
                "a byte piece although byte_fallback is false".into(),
            ));
        }
        if kind == PieceType::Byte && byte_of_piece(&p.piece).is_none() {
            return Err(invalid("a byte piece not spelled <0xNN>".into()));
        }
        // + 0.0 turns -0.0 into 0.0: C++ compares scores with `<`, where they tie.
        entries.push(Entry {
            piece: p.piece.clone(),
            score: p.score() + 0.0,
            kind,
        });
    }
    Ok((entries, mergeable, reserved))
}

/// The ids of `<0x00>` … `<0xFF>`; byte fallback needs all 256.
fn byte_ids(
    entries: &[Entry],
    reserved: &FxHashMap<String, u32>,
) -> Result<Box<[u32; 256]>, SpmError> {
    let mut ids = Box::new([0u32; 256]);
    for (b, slot) in ids.iter_mut().enumerate() {
        let id = reserved.get(&format!("<0x{b:02X}>")).copied();
        let id = id.filter(|&id| entries[id as usize].kind == PieceType::Byte);
        *slot = id.ok_or_else(|| {
            SpmError::Invalid(format!(
                "byte_fallback is on but the byte piece <0x{b:02X}> is missing"
            ))
        })?;
    }
    Ok(ids)
}

/// The pairs of pieces that make a piece, by left id, each left's right ids
/// sorted: a lookup reads the left's offsets and searches a short list, or,
/// for a left with many rights, tests a bit.
///
/// Why not a hash table: on text seen for the first time every candidate pair
/// is a lookup, and hashing scatters them over a table of 59 K pairs (4 MB in
/// Mistral's case), each a cache miss. These arrays take 12 bytes a pair plus 8
/// an id (under 1 MB), and a language's pairs share their lefts' lists.
///
/// Most lookups on new text are in long lists (`▁` has 5,263 rights, `a` 510),
/// where a binary search is a chain of dependent loads. A left with more than
/// [`DENSE_ABOVE`] rights (49 of Mistral's) also has its rights as a bit set
/// over all ids, with the count of set bits before each 64-bit word: the
/// position in its list is a rank, two loads that do not wait on each other.
#[derive(Debug, Default)]
pub struct PairTable {
    /// For each left id: where its pairs start in `rights`, and which block of
    /// `bits` and `ranks` is its bit set ([`NO_BLOCK`] for none). One more
    /// entry at the end, for the last list's end.
    heads: Vec<(u32, u32)>,
    rights: Vec<u32>,
    /// For each entry of `rights`: the piece the pair makes, and its score.
    made: Vec<(u32, f32)>,
    /// 64-bit words per block: enough for every id.
    block_words: usize,
    bits: Vec<u64>,
    /// Set bits in the block before each word.
    ranks: Vec<u16>,
}

/// Lefts with more rights than this get a bit set (see [`PairTable`]).
const DENSE_ABOVE: usize = 128;
const NO_BLOCK: u32 = u32::MAX;

impl PairTable {
    #[inline]
    pub fn get(&self, left: u32, right: u32) -> Option<(u32, f32)> {
        let ((start, block), (end, _)) = match self.heads.get(left as usize..left as usize + 2) {
            Some(&[head, next]) => (head, next),
            _ => return None,
        };
        let start = start as usize;
        if block != NO_BLOCK {
            let at = block as usize * self.block_words + (right as usize >> 6);
            let word = *self.bits.get(at)?;
            let bit = 1u64 << (right & 63);
            if word & bit == 0 {
                return None;
            }
            let before = self.ranks[at] as usize + (word & (bit - 1)).count_ones() as usize;
            return Some(self.made[start + before]);
        }
        let rights = &self.rights[start..end as usize];
        let found = if rights.len() <= 8 {
            rights.iter().position(|&r| r == right)
        } else {
            rights.binary_search(&right).ok()
        };
        found.map(|i| self.made[start + i])
    }

    /// Asks the CPU for the offsets a lookup of `left` reads first (a hint).
    #[inline]
    pub fn prefetch(&self, left: u32) {
        crate::packed::prefetch(self.heads.get(left as usize));
    }
}

/// Every (left, right) -> whole among mergeable pieces; see [`SpmModel::pairs`].
fn pair_table(mergeable: &FxHashMap<String, u32>, entries: &[Entry]) -> PairTable {
    // A cut can only make two pieces where both parts have the length of some
    // piece: trying every cut of a piece of n bytes hashed O(n) bytes per cut, which
    // made a 1 MB piece take a minute to load. With D distinct lengths, a piece costs
    // O(D n), and D is small (tens for real models; at most about sqrt(2 x total
    // bytes) for any).
    let mut lengths: Vec<usize> = mergeable.keys().map(String::len).collect();
    lengths.sort_unstable();
    lengths.dedup();
    let mut pairs: Vec<(u32, u32, u32)> = Vec::new();
    for (piece, &id) in mergeable {
        let n = piece.len();
        for &cut in lengths.iter().take_while(|&&cut| cut < n) {
            if !piece.is_char_boundary(cut) || lengths.binary_search(&(n - cut)).is_err() {
                continue;
            }
            let (left, right) = piece.split_at(cut);
            if let (Some(&l), Some(&r)) = (mergeable.get(left), mergeable.get(right)) {
                pairs.push((l, r, id));
            }
        }
    }
    pairs.sort_unstable();
    let mut counts = vec![0u32; entries.len()];
    for &(l, _, _) in &pairs {
        counts[l as usize] += 1;
    }
    let mut table = PairTable {
        heads: Vec::with_capacity(entries.len() + 1),
        rights: pairs.iter().map(|&(_, r, _)| r).collect(),
        made: pairs
            .iter()
            .map(|&(_, _, id)| (id, entries[id as usize].score))
            .collect(),
        block_words: entries.len().div_ceil(64),
        ..PairTable::default()
    };
    let mut start = 0u32;
    for &count in &counts {
        let mut block = NO_BLOCK;
        if count as usize > DENSE_ABOVE {
            block = (table.bits.len() / table.block_words) as u32;
            let base = table.bits.len();
            table.bits.resize(base + table.block_words, 0);
            for &r in &table.rights[start as usize..(start + count) as usize] {
                table.bits[base + (r as usize >> 6)] |= 1 << (r & 63);
            }
            let mut before = 0u16;
            for w in &table.bits[base..] {
                table.ranks.push(before);
                before += w.count_ones() as u16;
            }
        }
        table.heads.push((start, block));
        start += count;
    }
    table.heads.push((start, NO_BLOCK));
    table
}

/// The key of two characters in [`SpmModel::joined`].
pub fn char_pair_key(a: char, b: char) -> u64 {
    (u64::from(a) << 32) | u64::from(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pair_table_finds_every_pair_and_nothing_else_in_short_and_long_lists() {
        // "x" joins with 300 pieces (a long list: a bit set), "w" with 40
        // (searched by bisection), "y" with three (scanned), "z" with none.
        let mut pieces: Vec<String> = ["w", "x", "y", "z"].map(String::from).to_vec();
        let rights: Vec<String> = (0..300).map(|i| format!("r{i:03}")).collect();
        pieces.extend(rights.iter().cloned());
        pieces.extend(rights.iter().map(|r| format!("x{r}")));
        pieces.extend(rights[..40].iter().map(|r| format!("w{r}")));
        pieces.extend(rights[..3].iter().map(|r| format!("y{r}")));
        let (ids, entries) = normal(&pieces);
        let table = pair_table(&ids, &entries);
        const { assert!(300 > DENSE_ABOVE && 40 <= DENSE_ABOVE) };
        for left in ["w", "x", "y", "z"] {
            for right in &pieces {
                let whole = ids.get(&format!("{left}{right}")).copied();
                let expected = whole.map(|id| (id, -(id as f32)));
                assert_eq!(table.get(ids[left], ids[right]), expected, "{left} {right}");
            }
        }
        assert_eq!(table.get(u32::MAX - 1, 0), None, "an id past the table");
        assert_eq!(
            table.get(ids["x"], u32::MAX - 1),
            None,
            "a right past the bits"
        );
    }

    fn normal(pieces: &[String]) -> (FxHashMap<String, u32>, Vec<Entry>) {
        let entries: Vec<Entry> = (pieces.iter().enumerate())
            .map(|(i, p)| Entry {
                piece: p.clone(),
                score: -(i as f32),
                kind: PieceType::Normal,
            })
            .collect();
        let ids = (pieces.iter().enumerate())
            .map(|(i, p)| (p.clone(), i as u32))
            .collect();
        (ids, entries)
    }

    #[test]
    fn a_megabyte_piece_gets_its_pairs_without_trying_every_cut() {
        // Before, every cut of every piece was hashed: a piece of n bytes cost
        // O(n^2), and this table took about a minute.
        let half = "ab".repeat(250_000);
        let pieces: Vec<String> = ["a", "b", "ab", "aab", &half, &(half.clone() + &half)]
            .map(String::from)
            .to_vec();
        let (ids, entries) = normal(&pieces);
        let table = pair_table(&ids, &entries);
        assert_eq!(table.get(4, 4), Some((5, -5.0)), "half + half");
        assert_eq!(table.get(0, 1), Some((2, -2.0)), "a + b");
        assert_eq!(table.get(0, 2), Some((3, -3.0)), "a + ab");
        assert_eq!(table.get(2, 4), None, "ab + half is no piece");
    }

    #[test]
    fn an_empty_file_is_refused_as_empty_not_as_a_unigram_model() {
        let e = SpmModel::from_bytes(b"").unwrap_err();
        assert_eq!(
            e.to_string(),
            "the file is empty: not a SentencePiece model"
        );
        // A well-formed message with none of a model's fields (field 100, varint 1).
        let e = SpmModel::from_bytes(&[0xa0, 0x06, 0x01]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "no pieces: not a SentencePiece model (or an empty one)"
        );
    }
}
