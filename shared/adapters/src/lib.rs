//! What tabletalk talks to besides its tables, each behind the interface the service needs:
//! the live channel ([`live::LiveChannel`]: Azure Web PubSub or the self-hosted server's own
//! hub), the event sink ([`events::EventSink`]: an Event Grid topic, or the notification
//! consumer in this process), Web Push delivery ([`push`]) and the one SSRF-safe HTTP client
//! every request to a user-supplied URL goes through ([`outbound`]), which link previews fetch
//! pages with ([`link_preview`]); the object store attachments
//! live in ([`objects`]: Azure Blob Storage or files under the data directory); and the clock the
//! limits read ([`clock`]), which tests move.

pub mod clock;
pub mod events;
pub mod link_preview;
pub mod live;
pub mod objects;
pub mod outbound;
pub mod outgoing;
pub mod push;
pub mod tasks;
pub mod thumbnails;
