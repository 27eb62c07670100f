//! memoria-shared: what every Memoria program must agree on byte for byte.
//!
//! It owns the note file format ([`note`]), note ids ([`id`]), the content hash ([`hash`]),
//! the clock abstraction ([`clock`]) and the encrypted forms of synced notes ([`e2ee`]). It
//! must never do I/O, spawn threads or depend on an async runtime: the engine, the sync server
//! and the desktop app all link it. Randomness, like time, is passed in.

pub mod clock;
pub mod e2ee;
pub mod hash;
pub mod id;
pub mod merge;
pub mod note;
pub mod protocol;

pub use clock::{Clock, FixedClock, SystemClock};
pub use hash::ContentHash;
pub use id::{IdError, NoteId, slugify};
pub use note::{Note, NoteType, ParseError, Relation, RelationKind, Source, Status, Trust};
pub use protocol::PROTOCOL_VERSION;
