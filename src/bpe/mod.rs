//! Byte-level BPE: the model as data (`model.rs`), the merge loops that encode one
//! piece (`merge.rs`), the piece cache (`cache.rs`), the encoder over text
//! (`encoder.rs`), training's merge loop (`train.rs`) and its
//! pair table (`pair_table.rs`), and recovering merges from
//! rank-only vocabularies (`ranks.rs`), and the one place special tokens get their ids
//! (`special_ids.rs`).

pub mod cache;
pub mod encoder;
pub mod merge;
pub mod model;
pub mod normalizer;
pub mod pair_table;
pub mod ranks;
pub mod special_ids;
pub mod train;

pub use encoder::Encoder;
pub use model::BpeModel;
