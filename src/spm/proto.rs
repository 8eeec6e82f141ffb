//! `ModelProto`, the message a SentencePiece `.model` file holds: the pieces
//! (string, score, type), the `TrainerSpec` the model was trained with and the
//! `NormalizerSpec`s applied before encoding / after decoding.
//!
//! Field numbers follow sentencepiece's `sentencepiece_model.proto` (proto2, so
//! every scalar has a default and "absent" differs from "set to the default").
//! The specs stay [`Message`]s with typed getters that apply those defaults: a
//! spec carries ~50 fields we never read, and keeping it as a field list keeps
//! them (and any unknown field) exactly. Writing puts fields in field-number
//! order with unknown fields last, as protobuf's own writers do, so a model read
//! and written back unchanged gives the same bytes.

use super::wire::{read_fields, write_field, Field, Message, Value};
use super::SpmError;

/// What a piece is for (`ModelProto.SentencePiece.Type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PieceType {
    /// An ordinary subword, produced by merges.
    Normal = 1,
    /// The unknown piece (`<unk>`); exactly one per model.
    Unknown = 2,
    /// A control symbol (`<s>`, `</s>`, `[INST]`): never produced from text.
    Control = 3,
    /// Matched verbatim in the input and never split or merged.
    UserDefined = 4,
    /// A piece merges may pass through but encoding never outputs.
    Unused = 5,
    /// `<0xNN>`: one UTF-8 byte, for characters with no piece (byte fallback).
    Byte = 6,
}

impl PieceType {
    pub fn from_i32(v: i32) -> Option<PieceType> {
        use PieceType::*;
        Some(match v {
            1 => Normal,
            2 => Unknown,
            3 => Control,
            4 => UserDefined,
            5 => Unused,
            6 => Byte,
            _ => return None,
        })
    }
}

/// One `ModelProto.SentencePiece`. `score` and `kind` are `None` when the file
/// leaves them out (reading as 0.0 and NORMAL).
#[derive(Debug, Clone, PartialEq)]
pub struct Piece {
    pub piece: String,
    pub score: Option<f32>,
    pub kind: Option<PieceType>,
    /// Fields other than 1–3, and a type number outside the enum (protobuf
    /// keeps those as unknown fields too).
    pub unknown: Vec<Field>,
}

impl Piece {
    pub fn new(piece: &str, score: f32, kind: PieceType) -> Piece {
        let kind = (kind != PieceType::Normal).then_some(kind);
        let score = Some(score);
        Piece {
            piece: piece.to_string(),
            score,
            kind,
            unknown: Vec::new(),
        }
    }

    pub fn score(&self) -> f32 {
        self.score.unwrap_or(0.0)
    }

    pub fn kind(&self) -> PieceType {
        self.kind.unwrap_or(PieceType::Normal)
    }

    fn parse(data: &[u8], base: usize, index: usize) -> Result<Piece, SpmError> {
        let mut piece = Piece {
            piece: String::new(),
            score: None,
            kind: None,
            unknown: vec![],
        };
        for (f, at) in read_fields(data, base)? {
            match (f.number, &f.value) {
                (1, Value::Bytes(b)) => {
                    piece.piece = String::from_utf8(b.clone()).map_err(|_| SpmError::Corrupt {
                        offset: at,
                        reason: format!("piece {index} is not valid UTF-8"),
                    })?;
                }
                (2, Value::Fixed32(v)) => piece.score = Some(f32::from_bits(*v)),
                (3, Value::Varint(v)) => match PieceType::from_i32(*v as i32) {
                    Some(kind) => piece.kind = Some(kind),
                    None => piece.unknown.push(f),
                },
                _ => piece.unknown.push(f),
            }
        }
        Ok(piece)
    }

    fn write(&self, out: &mut Vec<u8>) {
        write_field(
            out,
            &Field {
                number: 1,
                value: Value::Bytes(self.piece.as_bytes().to_vec()),
            },
        );
        if let Some(score) = self.score {
            write_field(
                out,
                &Field {
                    number: 2,
                    value: Value::Fixed32(score.to_bits()),
                },
            );
        }
        if let Some(kind) = self.kind {
            write_field(
                out,
                &Field {
                    number: 3,
                    value: Value::Varint(kind as u64),
                },
            );
        }
        self.unknown.iter().for_each(|f| write_field(out, f));
    }
}

/// `TrainerSpec`: how the model was trained; encoding reads the model type,
/// byte fallback, whitespace-as-suffix and the special pieces' names from it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TrainerSpec(pub Message);

/// `TrainerSpec.ModelType`.
pub const UNIGRAM: i32 = 1;
pub const BPE: i32 = 2;
pub const WORD: i32 = 3;
pub const CHAR: i32 = 4;

impl TrainerSpec {
    /// The model type; proto2's default is UNIGRAM.
    pub fn model_type(&self) -> i32 {
        self.0.int32(3).unwrap_or(UNIGRAM)
    }
    pub fn vocab_size(&self) -> i32 {
        self.0.int32(4).unwrap_or(8000)
    }
    pub fn max_sentencepiece_length(&self) -> i32 {
        self.0.int32(20).unwrap_or(16)
    }
    pub fn split_by_whitespace(&self) -> bool {
        self.0.boolean(22).unwrap_or(true)
    }
    pub fn treat_whitespace_as_suffix(&self) -> bool {
        self.0.boolean(24).unwrap_or(false)
    }
    pub fn split_digits(&self) -> bool {
        self.0.boolean(25).unwrap_or(false)
    }
    pub fn byte_fallback(&self) -> bool {
        self.0.boolean(35).unwrap_or(false)
    }
    pub fn unk_id(&self) -> i32 {
        self.0.int32(40).unwrap_or(0)
    }
    pub fn bos_id(&self) -> i32 {
        self.0.int32(41).unwrap_or(1)
    }
    pub fn eos_id(&self) -> i32 {
        self.0.int32(42).unwrap_or(2)
    }
    pub fn pad_id(&self) -> i32 {
        self.0.int32(43).unwrap_or(-1)
    }
    /// Text decode writes for `<unk>` (default " ⁇ ").
    pub fn unk_surface(&self) -> &str {
        self.0.string(44).unwrap_or(" \u{2047} ")
    }
    /// The special pieces' names; an empty string means the default, as in
    /// sentencepiece's `ModelInterface::unk_piece()` and friends.
    pub fn unk_piece(&self) -> &str {
        self.0
            .string(45)
            .filter(|s| !s.is_empty())
            .unwrap_or("<unk>")
    }
    pub fn bos_piece(&self) -> &str {
        self.0.string(46).filter(|s| !s.is_empty()).unwrap_or("<s>")
    }
    pub fn eos_piece(&self) -> &str {
        self.0
            .string(47)
            .filter(|s| !s.is_empty())
            .unwrap_or("</s>")
    }
    pub fn pad_piece(&self) -> &str {
        self.0
            .string(48)
            .filter(|s| !s.is_empty())
            .unwrap_or("<pad>")
    }
}

/// `NormalizerSpec`: the rewriting of text before encoding (and, as the
/// denormalizer, after decoding).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NormalizerSpec(pub Message);

impl NormalizerSpec {
    pub fn name(&self) -> &str {
        self.0.string(1).unwrap_or("")
    }
    /// The compiled rules: a double-array trie and its replacement strings.
    pub fn precompiled_charsmap(&self) -> &[u8] {
        self.0.bytes(2).unwrap_or(&[])
    }
    pub fn add_dummy_prefix(&self) -> bool {
        self.0.boolean(3).unwrap_or(true)
    }
    pub fn remove_extra_whitespaces(&self) -> bool {
        self.0.boolean(4).unwrap_or(true)
    }
    pub fn escape_whitespaces(&self) -> bool {
        self.0.boolean(5).unwrap_or(true)
    }
}

/// A whole `.model` file.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelProto {
    pub pieces: Vec<Piece>,
    pub trainer_spec: Option<TrainerSpec>,
    pub normalizer_spec: Option<NormalizerSpec>,
    pub denormalizer_spec: Option<NormalizerSpec>,
    /// `self_test_data` (field 4) and any unknown fields, as read.
    pub other: Vec<Field>,
}

impl ModelProto {
    /// Parses a serialized `ModelProto`; errors name the byte offset at fault.
    pub fn parse(data: &[u8]) -> Result<ModelProto, SpmError> {
        let mut model = ModelProto::default();
        for (f, at) in read_fields(data, 0)? {
            match (f.number, f.value) {
                (1, Value::Bytes(b)) => {
                    let index = model.pieces.len();
                    model.pieces.push(Piece::parse(&b, at, index)?);
                }
                (2, Value::Bytes(b)) => {
                    model.trainer_spec = Some(TrainerSpec(Message::parse(&b, at)?));
                }
                (3, Value::Bytes(b)) => {
                    model.normalizer_spec = Some(NormalizerSpec(Message::parse(&b, at)?));
                }
                (5, Value::Bytes(b)) => {
                    model.denormalizer_spec = Some(NormalizerSpec(Message::parse(&b, at)?));
                }
                (number, value) => model.other.push(Field { number, value }),
            }
        }
        Ok(model)
    }

    /// Serializes the model: fields in number order, unknown fields last.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        let mut nested = Vec::new();
        for piece in &self.pieces {
            nested.clear();
            piece.write(&mut nested);
            write_field(
                &mut out,
                &Field {
                    number: 1,
                    value: Value::Bytes(nested.clone()),
                },
            );
        }
        let message = |number, m: &Message| Field {
            number,
            value: Value::Bytes(m.to_bytes()),
        };
        if let Some(spec) = &self.trainer_spec {
            write_field(&mut out, &message(2, &spec.0));
        }
        if let Some(spec) = &self.normalizer_spec {
            write_field(&mut out, &message(3, &spec.0));
        }
        let (self_test, unknown): (Vec<&Field>, Vec<&Field>) =
            self.other.iter().partition(|f| f.number == 4);
        self_test.into_iter().for_each(|f| write_field(&mut out, f));
        if let Some(spec) = &self.denormalizer_spec {
            write_field(&mut out, &message(5, &spec.0));
        }
        unknown.into_iter().for_each(|f| write_field(&mut out, f));
        out
    }

    /// The trainer spec, or an empty one (all defaults) when the file has none.
    pub fn trainer(&self) -> TrainerSpec {
        self.trainer_spec.clone().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny_model() -> ModelProto {
        let mut trainer = Message::default();
        trainer.set(3, Value::Varint(BPE as u64));
        ModelProto {
            pieces: vec![
                Piece::new("<unk>", 0.0, PieceType::Unknown),
                Piece::new("a", -1.0, PieceType::Normal),
            ],
            trainer_spec: Some(TrainerSpec(trainer)),
            normalizer_spec: Some(NormalizerSpec::default()),
            denormalizer_spec: None,
            other: vec![Field {
                number: 77,
                value: Value::Varint(5),
            }],
        }
    }

    #[test]
    fn a_model_round_trips_through_bytes() {
        let model = tiny_model();
        let bytes = model.to_bytes();
        let back = ModelProto::parse(&bytes).unwrap();
        assert_eq!(back, model);
        assert_eq!(back.to_bytes(), bytes);
    }

    #[test]
    fn absent_fields_read_as_proto2_defaults() {
        let model = ModelProto::parse(&[]).unwrap();
        let trainer = model.trainer();
        assert_eq!(trainer.model_type(), UNIGRAM);
        assert_eq!(
            (trainer.unk_id(), trainer.bos_id(), trainer.pad_id()),
            (0, 1, -1)
        );
        assert_eq!(trainer.unk_surface(), " \u{2047} ");
        let normalizer = NormalizerSpec::default();
        assert!(normalizer.add_dummy_prefix() && normalizer.remove_extra_whitespaces());
    }

    #[test]
    fn a_corrupt_nested_piece_names_its_file_offset() {
        let mut bytes = tiny_model().to_bytes();
        // The first piece is at byte 2 ("0a len"); make its string claim 100 bytes.
        assert_eq!(bytes[2], 0x0a);
        bytes[3] = 100;
        let err = ModelProto::parse(&bytes).unwrap_err();
        assert!(matches!(err, SpmError::Corrupt { offset: 2, .. }), "{err}");
    }
}
